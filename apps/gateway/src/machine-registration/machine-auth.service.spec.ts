import { hashToken, MachinesRepository } from '#tern/persistence';
import { newTestService } from '../../../../test/support/test-service.js';
import { AuthService } from '../auth/auth.service.js';
import type { Principal } from '../auth/principal.js';
import { MachineAuthService } from './machine-auth.service.js';

const operator: Principal = { workspaceId: 'w0', workspaceName: 'default', tokenId: 'op', role: 'operator' };

async function machineAuth() {
  const { sut, fake } = await newTestService(MachineAuthService);
  const machines = fake(MachinesRepository);
  machines.findByJoinTokenHash.mockImplementation(async (hash) => (hash === hashToken('join-1') ? ({ id: 'm-new' } as never) : null));
  machines.findByCredentialHash.mockImplementation(async (hash) => (hash === hashToken('cred-1') ? ({ id: 'm-old' } as never) : null));
  const auth = fake(AuthService);
  auth.verify.mockImplementation(async (token) => (token === 'tern_op' ? operator : undefined) as never);
  return { sut, machines, auth };
}

describe('MachineAuthService.identify', () => {
  it('tells a join token, a machine token and an API token apart by where their hash is found', async () => {
    const { sut, machines } = await machineAuth();
    expect(await sut.identify('Bearer join-1')).toEqual({ kind: 'join-token', machine: { id: 'm-new' } });
    expect(await sut.identify('bearer cred-1')).toEqual({ kind: 'machine-token', machine: { id: 'm-old' } });
    expect(await sut.identify('Bearer tern_op')).toEqual({ kind: 'api-token', principal: operator });
    expect(machines.findByJoinTokenHash).toHaveBeenCalledWith(hashToken('join-1'));
  });

  it('answers 401 for a missing, malformed or unknown token, saying which kinds it takes', async () => {
    const { sut } = await machineAuth();
    await expect(sut.identify(undefined)).rejects.toMatchObject({
      status: 401,
      message: expect.stringMatching(/^missing token: send "Authorization: Bearer <token>" with a join token/),
    });
    await expect(sut.identify('Basic abc')).rejects.toMatchObject({
      status: 401,
      message: 'malformed Authorization header: expected "Bearer <token>"',
    });
    await expect(sut.identify('Bearer removed')).rejects.toMatchObject({
      status: 401,
      message: expect.stringMatching(/a removed machine's tokens no longer work$/),
    });
  });
});
