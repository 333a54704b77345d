import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Sandbox } from '#tern/persistence';
import { newTestService } from '../../../../test/support/test-service.js';
import type { Principal } from '../auth/principal.js';
import { SandboxCallsService } from './sandbox-calls.service.js';
import { SandboxesService } from './sandboxes.service.js';

const principal: Principal = { workspaceId: 'w1', workspaceName: 'team', tokenId: 'tok1', role: 'admin' };
const sandbox = { id: 'sb-1', machineId: 'm-1', ports: [8080], spec: {}, createdAt: new Date(), timeoutSeconds: 600 } as unknown as Sandbox;
const request = (method: string, url: string) => ({ method, url, headers: {} }) as FastifyRequest;
/** Never reached by a refused call: answering would need a reply. */
const reply = {} as FastifyReply;

async function calls() {
  const { sut, fake } = await newTestService(SandboxCallsService);
  const sandboxes = fake(SandboxesService);
  sandboxes.running.mockResolvedValue(sandbox);
  return { sut, sandboxes };
}

describe('SandboxCallsService, what it refuses before a call leaves the gateway', () => {
  it('refuses a port that was not exposed with a 404 saying how to expose it', async () => {
    const { sut, sandboxes } = await calls();
    await expect(sut.forwardToPort(principal, request('GET', '/sandbox/sb-1/3000/api'), reply)).rejects.toMatchObject({
      status: 404,
      message: 'port 3000 of sandbox sb-1 is not exposed (POST /api/v1/sandboxes/sb-1/ports {"port": 3000})',
    });
    expect(sandboxes.running).toHaveBeenCalledWith(principal, 'sb-1');
  });

  it('refuses a method sandbox ports do not carry with a 400, before looking the sandbox up', async () => {
    const { sut, sandboxes } = await calls();
    await expect(sut.forwardToPort(principal, request('PROPFIND', '/sandbox/sb-1/8080/'), reply)).rejects.toMatchObject({
      status: 400,
      message: 'method PROPFIND is not supported on sandbox ports',
    });
    expect(sandboxes.running).not.toHaveBeenCalled();
  });

  it('answers 404 for a path that names no sandbox and port, or no public token', async () => {
    const { sut, sandboxes } = await calls();
    await expect(sut.forwardToPort(principal, request('GET', '/sandbox/sb-1'), reply)).rejects.toMatchObject({ status: 404 });
    await expect(sut.forwardToPublicPort(request('GET', '/sandbox-public/'), reply)).rejects.toMatchObject({ status: 404 });
    expect(sandboxes.running).not.toHaveBeenCalled();
    expect(sandboxes.publicPort).not.toHaveBeenCalled();
  });

  it('carries no call to a sandbox that is not running', async () => {
    const { sut, sandboxes } = await calls();
    sandboxes.running.mockRejectedValue(Object.assign(new Error('sandbox sb-1 is stopped: create a new one'), { status: 409 }));
    await expect(sut.forward(principal, 'sb-1', { method: 'POST', route: '/exec' }, reply)).rejects.toMatchObject({ status: 409 });
  });
});
