import { EventEmitter } from 'node:events';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { type DeploymentRecord, type RouteRecord } from '#tern/contracts';
import { InvokeError, type InvokeResponse } from '#tern/messaging';
import { ContainersRepository } from '#tern/persistence';
import { deploymentRecord } from '../../../../test/support/deployment-records.js';
import { newTestService } from '../../../../test/support/test-service.js';
import type { Principal } from '../auth/principal.js';
import { EndpointsService } from './endpoints.service.js';
import { InvokeClient } from './invoke-client.js';
import { Lane } from './lane.js';
import { LanesService } from './lanes.service.js';
import { RoutesMirror } from './routes-mirror.js';

const principal: Principal = { workspaceId: 'w1', workspaceName: 'team', tokenId: 't1', role: 'admin' };
const echo = deploymentRecord({ name: 'echo', kind: 'endpoint', timeout: 1 });

const route = (containerId: string, capacity = 1): RouteRecord => ({
  containerId,
  deploymentId: echo.deploymentId,
  version: echo.version,
  machineId: `m-${containerId}`,
  capacity,
  readyAt: new Date(0).toISOString(),
});

const ok = (text: string): InvokeResponse => ({
  status: 200,
  headers: { 'content-type': 'text/plain' },
  body: (async function* () {})(),
  whole: Buffer.from(text),
});

/** An EndpointsService whose `echo` version has a lane with these ready containers. */
async function endpoints(routes: RouteRecord[], record: DeploymentRecord = echo) {
  const { sut, fake } = await newTestService(EndpointsService);
  const table = fake(RoutesMirror);
  table.ready.mockResolvedValue(true);
  table.find.mockImplementation((workspaceId, name) =>
    workspaceId === record.workspaceId && name === record.name ? { known: true, record } : { known: false },
  );
  table.record.mockReturnValue(record);
  const lane = new Lane(record.deploymentId, record.version, 2);
  lane.setRoutes(routes);
  fake(LanesService).lane.mockReturnValue(lane);
  const invoker = fake(InvokeClient);
  return { sut, lane, invoker, containers: fake(ContainersRepository) };
}

function call(url = '/endpoint/echo/hi') {
  const request = { url, method: 'POST', headers: { host: 'gateway' }, body: Buffer.from('hello') } as unknown as FastifyRequest;
  const raw = Object.assign(new EventEmitter(), { writableFinished: false });
  const sent: { status?: number; headers?: Record<string, string>; body?: unknown } = {};
  const reply = {
    raw,
    code: (status: number) => ((sent.status = status), reply),
    headers: (headers: Record<string, string>) => ((sent.headers = headers), reply),
    send: (body: unknown) => ((sent.body = body), (raw.writableFinished = true), reply),
  };
  return { request, reply: reply as unknown as FastifyReply, sent };
}

describe('EndpointsService.forward: the retry on a vanished container', () => {
  it('sends a request whose container vanished (no responders) to another one with room, and marks the first suspect', async () => {
    const { sut, lane, invoker } = await endpoints([route('c1'), route('c2')]);
    const tried: string[] = [];
    invoker.send.mockImplementation(async (target) => {
      tried.push(target.containerId);
      if (tried.length === 1) throw new InvokeError(503, 'no responders');
      return ok('from the second');
    });
    const { request, reply, sent } = call();
    await sut.forward(principal, request, reply);
    expect(tried).toHaveLength(2);
    expect(new Set(tried)).toEqual(new Set(['c1', 'c2']));
    expect(sent.status).toBe(200);
    expect(sent.headers).toMatchObject({ 'x-tern-container-id': tried[1], 'x-tern-version': '1' });
    expect(Buffer.from(sent.body as Uint8Array).toString()).toBe('from the second');
    // The vanished one takes nothing for a while; the other is free again.
    expect(lane.tryAcquire()).toBe(tried[1]);
    expect(lane.tryAcquire()).toBeUndefined();
  });

  it('gives up after two retries with a 503 that names the container and says to retry', async () => {
    const { sut, invoker } = await endpoints([route('c1'), route('c2'), route('c3'), route('c4')]);
    invoker.send.mockRejectedValue(new InvokeError(503, 'no responders'));
    const { request, reply } = call();
    await expect(sut.forward(principal, request, reply)).rejects.toMatchObject({
      status: 503,
      message: expect.stringMatching(/^container c\d of "echo" went away before answering; retry shortly$/),
    });
    expect(invoker.send).toHaveBeenCalledTimes(3);
  });

  it('answers 503 at once when no other container has room to retry on', async () => {
    const { sut, invoker } = await endpoints([route('c1')]);
    invoker.send.mockRejectedValue(new InvokeError(503, 'no responders'));
    const { request, reply } = call();
    await expect(sut.forward(principal, request, reply)).rejects.toMatchObject({ status: 503 });
    expect(invoker.send).toHaveBeenCalledTimes(1);
  });

  it('does not retry a request a container may have run (502), and marks that container suspect', async () => {
    const { sut, lane, invoker } = await endpoints([route('c1'), route('c2')]);
    invoker.send.mockRejectedValue(new InvokeError(502, 'the container broke off'));
    const { request, reply } = call();
    await expect(sut.forward(principal, request, reply)).rejects.toMatchObject({ status: 502, message: 'the container broke off' });
    expect(invoker.send).toHaveBeenCalledTimes(1);
    const [[target]] = invoker.send.mock.calls;
    expect(lane.tryAcquire()).not.toBe(target.containerId);
  });

  it("passes on an invoke's own refusal (413) without retrying or suspecting the container", async () => {
    const { sut, lane, invoker } = await endpoints([route('c1', 2)]);
    invoker.send.mockRejectedValue(new InvokeError(413, 'body too large'));
    const { request, reply } = call();
    await expect(sut.forward(principal, request, reply)).rejects.toMatchObject({ status: 413 });
    expect(invoker.send).toHaveBeenCalledTimes(1);
    expect(lane.tryAcquire()).toBe('c1');
  });
});

describe('EndpointsService.forward: what it refuses', () => {
  it('answers 404 for a name the workspace does not have', async () => {
    const { sut, invoker } = await endpoints([route('c1')]);
    const { request, reply } = call('/endpoint/other');
    await expect(sut.forward(principal, request, reply)).rejects.toMatchObject({ status: 404, message: 'deployment "other" not found' });
    expect(invoker.send).not.toHaveBeenCalled();
  });

  it('answers 400 naming where to call a function', async () => {
    const { sut } = await endpoints([], deploymentRecord({ name: 'echo', kind: 'function' }));
    const { request, reply } = call();
    await expect(sut.forward(principal, request, reply)).rejects.toMatchObject({
      status: 400,
      message: 'deployment "echo" is a function, not an endpoint: call it at /function/echo',
    });
  });

  it('answers 503 for a stopped deployment without waiting for a container', async () => {
    const { sut, invoker } = await endpoints([route('c1')], { ...echo, state: 'stopped' });
    const { request, reply } = call();
    await expect(sut.forward(principal, request, reply)).rejects.toMatchObject({
      status: 503,
      message: expect.stringMatching(/stopped: start it/),
    });
    expect(invoker.send).not.toHaveBeenCalled();
  });

  it('answers 429 when the buffer of requests waiting for room is full', async () => {
    const { sut } = await endpoints([]);
    const waiting = [call(), call()].map(({ request, reply }) => sut.forward(principal, request, reply).catch((e: unknown) => e));
    const { request, reply } = call();
    await expect(sut.forward(principal, request, reply)).rejects.toMatchObject({
      status: 429,
      message: expect.stringMatching(/buffer full: 2 requests/),
    });
    await Promise.all(waiting);
  });

  it("answers 504 when no container took the request within the deployment's timeout, with the reason on record", async () => {
    const { sut, containers } = await endpoints([]);
    containers.whyNoContainer.mockResolvedValue('the image could not be pulled');
    const { request, reply } = call();
    await expect(sut.forward(principal, request, reply)).rejects.toMatchObject({
      status: 504,
      message: 'no container of "echo" v1 could take the request within 1 s; the image could not be pulled',
    });
  });
});
