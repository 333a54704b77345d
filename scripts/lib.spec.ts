import { mergeContext } from './lib/cli-config.mjs';
import { notUp, isReady, progressLine } from './lib/health.mjs';
import { readable } from './lib/logs.mjs';
import { hostPort, isPortFree, freePort, pickPort } from './lib/net.mjs';
import { newAdminToken } from './lib/state.mjs';
import { nextBackoff } from './lib/supervisor.mjs';

/** The pure parts of scripts/lib; scripts/up.mjs as a whole is exercised by test/up.test.ts. */
describe('scripts/lib', () => {
  it('admin tokens are tern_ + 43 base64url characters, never repeated', () => {
    const a = newAdminToken();
    expect(a).toMatch(/^tern_[A-Za-z0-9_-]{43}$/);
    expect(newAdminToken()).not.toBe(a);
  });

  it('merges the local context into an existing CLI config and makes it current', () => {
    const existing = { current: 'prod', contexts: { prod: { gateway: 'https://t.example', token: 'p' } }, editor: 'vim' };
    expect(mergeContext(existing, 'local', { gateway: 'http://127.0.0.1:1994', token: 't' })).toEqual({
      current: 'local',
      editor: 'vim',
      contexts: { prod: { gateway: 'https://t.example', token: 'p' }, local: { gateway: 'http://127.0.0.1:1994', token: 't' } },
    });
    expect(mergeContext(undefined, 'local', { gateway: 'g', token: 't' })).toEqual({
      current: 'local',
      contexts: { local: { gateway: 'g', token: 't' } },
    });
    expect(mergeContext([], 'local', { gateway: 'g', token: 't' }).contexts.local.gateway).toBe('g');
  });

  it('backs off 1 s, doubling to 30 s while a child keeps crashing, and starts over once it ran 30 s', () => {
    const seq: number[] = [];
    let b = 0;
    for (let i = 0; i < 7; i++) seq.push((b = nextBackoff(b, 500)));
    expect(seq).toEqual([1000, 2000, 4000, 8000, 16000, 30000, 30000]);
    expect(nextBackoff(30000, 31_000)).toBe(1000);
  });

  it('reads host and port from NATS and Postgres URLs', () => {
    expect(hostPort('nats://127.0.0.1:4222', 4222)).toEqual({ host: '127.0.0.1', port: 4222 });
    expect(hostPort('nats://a:1,nats://b:2', 4222)).toEqual({ host: 'a', port: 1 });
    expect(hostPort('localhost', 4222)).toEqual({ host: 'localhost', port: 4222 });
    expect(hostPort('postgres://u:p@db/test', 5432)).toEqual({ host: 'db', port: 5432 });
  });

  it('finds free ports and keeps claimed ones apart', async () => {
    const claimed = new Set<number>();
    const a = await pickPort(0, claimed);
    const b = await pickPort(a, claimed);
    expect(a).not.toBe(b);
    expect(await isPortFree(a)).toBe(true);
    expect(await freePort(new Set([a, b]))).not.toBe(a);
  });

  it('tells what is not up from a /health/ready answer', () => {
    const up = { status: 'up', instances: [] };
    const body = {
      status: 'degraded',
      services: { gateway: up, scheduler: { status: 'down', instances: [] }, autoscaler: up, metering: up, reputation: up },
      agents: [],
    };
    expect(notUp({ body })).toEqual(['scheduler', 'agent']);
    expect(notUp({ error: 'ECONNREFUSED' })).toEqual(['gateway', 'scheduler', 'autoscaler', 'metering', 'reputation', 'agent']);
    expect(isReady({ body })).toBe(false);
    const ok = { ...body, status: 'ok', services: { ...body.services, scheduler: up }, agents: [{ id: 'a' }] };
    expect(isReady({ body: ok })).toBe(true);
    expect(isReady({ body: { ...ok, agents: [] } })).toBe(false);
    expect(progressLine({ body }, 3000)).toContain('agents');
  });

  it('makes pino lines readable and leaves other lines alone', () => {
    expect(readable('{"level":50,"time":"2026-01-01T10:00:00.123Z","context":"X","msg":"boom","err":{"message":"bad"}}')).toBe(
      '10:00:00.123 ERROR [X] boom — bad',
    );
    expect(readable('plain text')).toBe('plain text');
  });
});
