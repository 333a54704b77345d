import { type MachineRegisterRequest } from '#tern/contracts';
import { backoffMs } from '#tern/timing';
import { REGISTER_BACKOFF, REGISTER_PATH, registerOnce, registerWithRetry } from './register.js';

const request = {
  pool: 'default',
  agentVersion: '0.1.0',
  inventory: {} as MachineRegisterRequest['inventory'],
} as MachineRegisterRequest;

const answer = {
  machineId: 'm-1',
  pool: 'default',
  machineToken: 'tern_machine_x',
  nats: { servers: ['nats://127.0.0.1:4222'], namespace: 'tern' },
  heartbeatIntervalSeconds: 10,
  heartbeatTtlSeconds: 30,
  minNetworkMbps: 100,
};

function fakeFetch(...responses: (Response | Error)[]) {
  const calls: { url: string; init: RequestInit }[] = [];
  const fn = (async (url: string, init: RequestInit) => {
    calls.push({ url, init });
    const next = responses.shift()!;
    if (next instanceof Error) throw next;
    return next;
  }) as unknown as typeof fetch;
  return { fn, calls };
}

const json = (status: number, body: unknown) =>
  new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });

describe('registration', () => {
  it('posts the request with the bearer token and returns the validated answer', async () => {
    const f = fakeFetch(json(201, answer));
    const outcome = await registerOnce({ gatewayUrl: 'http://gw', token: 'tern_join_t', request, fetch: f.fn });
    expect(outcome).toEqual({ kind: 'registered', response: answer });
    expect(f.calls[0].url).toBe(`http://gw${REGISTER_PATH}`);
    expect((f.calls[0].init.headers as Record<string, string>).authorization).toBe('Bearer tern_join_t');
    expect(JSON.parse(String(f.calls[0].init.body))).toEqual(request);
  });

  it("refuses for good on 401/403/400/409 with the gateway's message", async () => {
    for (const status of [401, 403, 400, 409]) {
      const f = fakeFetch(
        json(status, { statusCode: status, message: status === 400 ? ['pool must be', 'x'] : 'join token already used' }),
      );
      const outcome = await registerOnce({ gatewayUrl: 'http://gw', token: 't', request, fetch: f.fn });
      expect(outcome).toEqual({ kind: 'refused', status, message: status === 400 ? 'pool must be; x' : 'join token already used' });
    }
  });

  it('retries network errors, 5xx, 404 and answers that are not a registration', async () => {
    const refused = Object.assign(new TypeError('fetch failed'), { cause: { code: 'ECONNREFUSED' } });
    const cases = [refused, json(503, { message: 'database down' }), json(404, { message: 'Cannot POST' }), json(200, { hello: 'world' })];
    const messages = [];
    for (const c of cases) {
      const outcome = await registerOnce({ gatewayUrl: 'http://gw', token: 't', request, fetch: fakeFetch(c).fn });
      expect(outcome.kind).toBe('retry');
      messages.push((outcome as { message: string }).message);
    }
    expect(messages[0]).toBe(`cannot reach http://gw${REGISTER_PATH}: ECONNREFUSED`);
    expect(messages[1]).toBe('503 database down');
    expect(messages[3]).toMatch(/not a registration/);
  });

  it('backs off 1 s, 2 s, 4 s … up to a minute, with ±20 % jitter', () => {
    expect([1, 2, 3, 4, 7, 20].map((a) => backoffMs(a, REGISTER_BACKOFF, () => 0.5))).toEqual([1000, 2000, 4000, 8000, 60_000, 60_000]);
    expect(backoffMs(1, REGISTER_BACKOFF, () => 0)).toBe(800);
    expect(backoffMs(1, REGISTER_BACKOFF, () => 1)).toBe(1200);
  });

  it('keeps retrying until the gateway answers, reporting each failure', async () => {
    const f = fakeFetch(new Error('boom'), json(502, {}), json(201, answer));
    const retries: number[] = [];
    const outcome = await registerWithRetry(
      { gatewayUrl: 'http://gw', token: 't', request, fetch: f.fn },
      { sleep: async () => undefined, onRetry: (n) => retries.push(n) },
    );
    expect(outcome.kind).toBe('registered');
    expect(retries).toEqual([1, 2]);
  });

  it('stops at a refusal without retrying', async () => {
    const f = fakeFetch(json(401, { message: 'invalid or revoked token' }));
    const outcome = await registerWithRetry(
      { gatewayUrl: 'http://gw', token: 't', request, fetch: f.fn },
      { sleep: async () => undefined },
    );
    expect(outcome).toEqual({ kind: 'refused', status: 401, message: 'invalid or revoked token' });
    expect(f.calls).toHaveLength(1);
  });
});
