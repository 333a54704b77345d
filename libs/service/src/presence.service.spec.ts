import { jest } from '@jest/globals';
import { hostname } from 'node:os';
import { TERN_CONFIG } from '#tern/config';
import { NATS_CONNECTION } from '#tern/messaging';
import { newTestService } from '../../../test/support/test-service.js';
import { PRESENCE_METADATA, PresenceService } from './presence.service.js';

type Callback = (err: Error | null, msg: { respond: (data: string) => void }) => void;

/** A NATS connection that keeps the subscriptions the service API makes, so a spec can ping it. */
function natsConnection() {
  const subscriptions = new Map<string, { callback: Callback; drain: jest.Mock<() => Promise<void>> }>();
  const nc = {
    isClosed: () => false,
    closed: () => new Promise<void>(() => undefined),
    subscribe: (subject: string, opts: { callback: Callback }) => {
      const sub = {
        callback: opts.callback,
        drain: jest.fn(async () => undefined),
        unsubscribe: jest.fn(),
        closed: new Promise(() => undefined),
      };
      subscriptions.set(subject, sub);
      return sub;
    },
  };
  /** What the process answers on a subject (its $SRV.PING), parsed. */
  const ask = (subject: string) => {
    let answer = '';
    subscriptions.get(subject)!.callback(null, { respond: (data) => (answer = data) });
    return JSON.parse(answer) as { name: string; metadata: Record<string, string> };
  };
  return { nc, subscriptions, ask };
}

async function presence() {
  const nats = natsConnection();
  const { sut } = await newTestService(PresenceService, [
    [NATS_CONNECTION, nats.nc],
    [TERN_CONFIG, { nats: { namespace: 'tern-blue' }, service: 'agent' }],
    [PRESENCE_METADATA, { machineId: 'm-1', pool: 'gpu' }],
  ]);
  return { sut, ...nats };
}

describe('PresenceService', () => {
  it('answers a ping as <namespace>-<service>, with its role, namespace, host, pid and what its app adds', async () => {
    const { sut, ask } = await presence();
    await sut.onApplicationBootstrap();
    const ping = ask('$SRV.PING');
    expect(ping.name).toBe('tern-blue-agent');
    expect(ping.metadata).toEqual({
      role: 'agent',
      namespace: 'tern-blue',
      machineId: 'm-1',
      pool: 'gpu',
      host: hostname(),
      pid: String(process.pid),
      startedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
    });
  });

  it('leaves the service registry when shutdown begins', async () => {
    const { sut, subscriptions } = await presence();
    await sut.onApplicationBootstrap();
    await sut.beforeApplicationShutdown('SIGTERM');
    expect([...subscriptions.values()].every((s) => s.drain.mock.calls.length === 1)).toBe(true);
  });

  it('shuts down without having announced', async () => {
    const { sut } = await presence();
    await expect(sut.beforeApplicationShutdown()).resolves.toBeUndefined();
  });
});
