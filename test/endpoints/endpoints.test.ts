import 'reflect-metadata';
import { request as httpRequest } from 'node:http';
import { Logger } from '@nestjs/common';
import type { KV } from '@nats-io/kv';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import {
  DEPLOYMENTS_BUCKET,
  type DeploymentRecord,
  deploymentKey,
  LOAD_REPORT,
  type LoadReport,
  type ResolvedSpec,
  ROUTES_BUCKET,
  type RouteRecord,
  SCALE_BACKLOG,
  type ScaleBacklog,
} from '#tern/contracts';
import { connectNats, encode, type InvokeHandler, Messaging, Namespace, serveInvoke } from '#tern/messaging';
import { createTestSchema, type TestSchema, testEnv, TEST_NATS, uniqueName } from '../support/isolation.js';
import { deleteNamespaces } from '../support/nats.js';
import { freePort, ServiceProcess, waitFor } from '../support/processes.js';

const ADMIN = `tern_${'e'.repeat(43)}`;
const quiet = new Logger('test');
quiet.log = quiet.warn = quiet.error = () => undefined;

/** A fake agent's container: echoes what it got, says who it is. */
const echo =
  (containerId: string): InvokeHandler =>
  async (head, body) => ({
    status: 200,
    headers: {
      'content-type': head.headers['content-type'] ?? 'application/octet-stream',
      'x-served-by': containerId,
      'x-path': head.path,
      'x-method': head.method,
      'x-seen-version': head.headers['x-tern-version'] ?? '',
      connection: 'close-me',
    },
    body,
  });

describe('gateway data plane: /endpoint/<name>', () => {
  let schema: TestSchema;
  let namespace: string;
  let gateway: ServiceProcess;
  let base: string;
  let nc: NatsConnection;
  let messaging: Messaging;
  let deployments: KV;
  let routes: KV;
  let workspaceId: string;
  const subs: Subscription[] = [];

  const call = (path: string, init: RequestInit & { token?: string | null } = {}) => {
    const { token = ADMIN, ...rest } = init;
    return fetch(`${base}${path}`, {
      ...rest,
      headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(rest.headers as Record<string, string>) },
    });
  };

  const deploy = async (name: string, version: number, over: Partial<DeploymentRecord> = {}, spec: Partial<ResolvedSpec> = {}) => {
    const deploymentId = over.deploymentId ?? `d-${name}`;
    const record: DeploymentRecord = {
      deploymentId,
      workspaceId,
      name,
      version,
      latest: true,
      state: 'active',
      spec: { name, kind: 'endpoint', workers: 1, concurrentRequests: 1, timeoutSeconds: 10, ...spec } as ResolvedSpec,
      updatedAt: new Date().toISOString(),
      ...over,
    };
    await deployments.put(deploymentKey(deploymentId, version), encode(record));
    // The gateway learns of it through its KV watch: on a loaded machine a request sent right
    // after the put found no such deployment (404), and a test waiting for it to be held timed
    // out. A version no deployment has answers "has no version" once the name is known.
    await waitFor(
      `the gateway to know ${name}`,
      async () => {
        const probe = await call(`/endpoint/${name}@999999`);
        return probe.status === 404 && /has no version/.test(((await probe.json()) as { message: string }).message);
      },
      15_000,
      20,
    );
    return record;
  };

  const route = async (containerId: string, deploymentId: string, version: number, capacity = 1, handler?: InvokeHandler) => {
    if (handler) subs.push(serveInvoke(messaging, { machineId: 'm1', containerId }, handler));
    const r: RouteRecord = { containerId, deploymentId, version, machineId: 'm1', capacity, readyAt: new Date().toISOString() };
    await routes.put(containerId, encode(r));
  };

  /** A handler that holds each request until released, to fill containers on purpose. */
  const held = (containerId: string) => {
    const waiting: (() => void)[] = [];
    const handler: InvokeHandler = async (head, body) => {
      await new Promise<void>((r) => waiting.push(r));
      return echo(containerId)(head, body, new AbortController().signal);
    };
    return { handler, waiting, releaseAll: () => waiting.splice(0).forEach((r) => r()) };
  };

  /**
   * A container that streams a piece every `everyMs`, `count` in all (or stalls after `stallAfter`)
   * until its request is stopped; each call records when and why it was stopped.
   */
  const ticking = (contentType: string, everyMs: number, count: number, stallAfter = Infinity) => {
    const calls: { stoppedAt: number; reason: unknown }[] = [];
    const handler: InvokeHandler = async (_head, _body, signal) => {
      const seen = { stoppedAt: 0, reason: undefined as unknown };
      calls.push(seen);
      signal.addEventListener('abort', () => Object.assign(seen, { stoppedAt: Date.now(), reason: signal.reason as unknown }));
      const stopped = new Promise((r) => signal.addEventListener('abort', r));
      return {
        status: 200,
        headers: { 'content-type': contentType },
        body: (async function* () {
          for (let i = 0; i < count && !signal.aborted; i++) {
            if (i >= stallAfter) return void (await stopped);
            yield Buffer.from(contentType === 'text/event-stream' ? `data: ${i}\n\n` : `{"i":${i}}\n`);
            await Promise.race([stopped, new Promise((r) => setTimeout(r, everyMs))]);
          }
        })(),
      };
    };
    return { handler, calls };
  };

  /** The data of the error event that ends an SSE text. */
  const errorEvent = (text: string) => {
    const at = text.lastIndexOf('event: error\ndata: ');
    expect(at).toBeGreaterThanOrEqual(0);
    expect(text.endsWith('\n\n')).toBe(true);
    return JSON.parse(text.slice(at + 'event: error\ndata: '.length).trim()) as unknown;
  };

  const watch = <T>(subject: string) => {
    const seen: T[] = [];
    subs.push(nc.subscribe(subject, { callback: (_e, m) => void seen.push(m.json<T>()) }));
    return seen;
  };

  beforeAll(async () => {
    schema = await createTestSchema('endpoints');
    namespace = uniqueName('endpoints');
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    nc = await connectNats({ ...TEST_NATS, name: 'endpoints-test' }, quiet);
    messaging = new Messaging(nc, new Namespace(namespace));
    deployments = await messaging.kv({ name: DEPLOYMENTS_BUCKET.name });
    routes = await messaging.kv({ name: ROUTES_BUCKET.name });
    gateway = new ServiceProcess(
      'gateway',
      testEnv(schema, namespace, { HTTP_PORT: String(port), BOOTSTRAP_ADMIN_TOKEN: ADMIN, ENDPOINT_BUFFER_SIZE: '2' }),
    ).start();
    await gateway.ready();
    workspaceId = ((await (await call('/api/v1/workspace')).json()) as { id: string }).id;
  });

  afterAll(async () => {
    for (const s of subs) s.unsubscribe();
    await gateway?.stop();
    await nc?.close();
    await schema?.drop();
    await deleteNamespaces(namespace);
  });

  it('answers 401 without a token and 404 for an unknown deployment, with a request id on both', async () => {
    const anonymous = await call('/endpoint/nothing', { token: null });
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('x-tern-request-id')).toMatch(/^[0-9a-f]{32}$/);
    const unknown = await call('/endpoint/nothing/x');
    expect(unknown.status).toBe(404);
    expect(unknown.headers.get('x-tern-request-id')).toMatch(/^[0-9a-f]{32}$/);
    expect(((await unknown.json()) as { message: string }).message).toBe('deployment "nothing" not found');
  });

  it('routes by name to the latest version, the path after the name untouched, and by @<N> or x-tern-version to a pinned one', async () => {
    const v1 = await deploy('echo', 1, { latest: false });
    await deploy('echo', 2);
    await route('c-echo-1', v1.deploymentId, 1, 4, echo('c-echo-1'));
    await route('c-echo-2', v1.deploymentId, 2, 4, echo('c-echo-2'));
    const json = '{ "a" :1,\n  "b": [ 2 ] }';
    const latest = await waitFor('a route to echo', async () => {
      const res = await call('/endpoint/echo/hello/world?x=1', {
        method: 'POST',
        body: json,
        headers: { 'content-type': 'application/json' },
      });
      return res.status === 200 ? res : undefined;
    });
    expect(latest.headers.get('x-served-by')).toBe('c-echo-2');
    expect(latest.headers.get('x-tern-container-id')).toBe('c-echo-2');
    expect(latest.headers.get('x-tern-version')).toBe('2');
    expect(latest.headers.get('x-path')).toBe('/hello/world?x=1');
    expect(latest.headers.get('content-type')).toBe('application/json');
    expect(latest.headers.get('x-tern-request-id')).toMatch(/^[0-9a-f]{32}$/);
    expect(latest.headers.get('connection')).not.toBe('close-me');
    expect(latest.headers.get('x-tern-notice')).toBeNull();
    expect(await latest.text()).toBe(json);

    // The OpenAI client's baseURL …/endpoint/echo/v1: the latest version, /v1 its own path, and
    // a notice that /v1 pinned version 1 once.
    const openai = await call('/endpoint/echo/v1/chat/completions', { method: 'POST', body: '{}' });
    expect(openai.headers.get('x-served-by')).toBe('c-echo-2');
    expect(openai.headers.get('x-path')).toBe('/v1/chat/completions');
    expect(openai.headers.get('x-tern-notice')).toMatch(/^"\/v1" was passed to the server .* pin version 1 with \/endpoint\/echo@1\//);

    const bytes = Buffer.from([0, 255, 1, 254, 10, 13]);
    const pinned = await call('/endpoint/echo@1', { method: 'PUT', body: bytes, headers: { 'content-type': 'image/png' } });
    expect(pinned.headers.get('x-served-by')).toBe('c-echo-1');
    expect(pinned.headers.get('x-tern-version')).toBe('1');
    expect(pinned.headers.get('x-path')).toBe('/');
    expect(Buffer.from(await pinned.arrayBuffer()).equals(bytes)).toBe(true);
    const pinnedPath = await call('/endpoint/echo@1/v1/models?x=1');
    expect([pinnedPath.headers.get('x-served-by'), pinnedPath.headers.get('x-path')]).toEqual(['c-echo-1', '/v1/models?x=1']);
    // The header pins too, and stays Tern's: the container never sees it.
    const byHeader = await call('/endpoint/echo/v1/models', { headers: { 'x-tern-version': '1' } });
    expect(byHeader.headers.get('x-served-by')).toBe('c-echo-1');
    expect(byHeader.headers.get('x-seen-version')).toBe('');

    const missing = await call('/endpoint/echo@9');
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { message: string }).message).toBe('deployment "echo" has no version 9');
    const bad = await call('/endpoint/echo@latest/x');
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { message: string }).message).toMatch(/^not a version: pin a version as \/endpoint\/echo@<N>/);
    const disagree = await call('/endpoint/echo@1', { headers: { 'x-tern-version': '2' } });
    expect(disagree.status).toBe(400);
  });

  it('sends to the container with the fewest outstanding requests, never past its capacity, and buffers the rest', async () => {
    const d = await deploy('pair', 1);
    const a = held('c-pair-a');
    const b = held('c-pair-b');
    await route('c-pair-a', d.deploymentId, 1, 1, a.handler);
    await route('c-pair-b', d.deploymentId, 1, 1, b.handler);
    await new Promise((r) => setTimeout(r, 300));
    const backlog = watch<ScaleBacklog>(messaging.subject(SCALE_BACKLOG));

    const first = call('/endpoint/pair');
    const second = call('/endpoint/pair');
    await waitFor('both containers busy', async () => a.waiting.length === 1 && b.waiting.length === 1);
    const third = call('/endpoint/pair');
    await waitFor('a backlog event', async () => backlog.find((e) => e.deploymentId === d.deploymentId));
    expect(a.waiting.length + b.waiting.length).toBe(2);

    a.releaseAll();
    await waitFor('the held request forwarded to the freed container', async () => a.waiting.length === 1);
    a.releaseAll();
    b.releaseAll();
    const served = await Promise.all([first, second, third].map(async (p) => (await p).headers.get('x-served-by')));
    expect(served.sort()).toEqual(['c-pair-a', 'c-pair-a', 'c-pair-b']);
  });

  it('holds requests with no container, asks for one, and forwards once a route appears', async () => {
    const d = await deploy('cold', 1);
    const backlog = watch<ScaleBacklog>(messaging.subject(SCALE_BACKLOG));
    const pending = call('/endpoint/cold/run', { method: 'POST', body: 'wake up' });
    const event = await waitFor('a backlog event', async () => backlog.find((e) => e.deploymentId === d.deploymentId));
    expect(event.heldRequests).toBe(1);
    await route('c-cold', d.deploymentId, 1, 1, echo('c-cold'));
    const res = await pending;
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('wake up');
  });

  it('answers 429 beyond the buffer and 504 once the timeout passes', async () => {
    // The timeout leaves the two held requests room to arrive on a loaded machine before it passes.
    const d = await deploy('full', 1, {}, { timeoutSeconds: 10 });
    const backlog = watch<ScaleBacklog>(messaging.subject(SCALE_BACKLOG));
    const held1 = call('/endpoint/full');
    const held2 = call('/endpoint/full');
    // Both held (the buffer holds 2 here) before the third arrives, however slow the machine.
    await waitFor(
      'two held requests',
      async () => backlog.some((e) => e.deploymentId === d.deploymentId && e.heldRequests === 2),
      9000,
      50,
    );
    const refused = await call('/endpoint/full');
    expect(refused.status).toBe(429);
    expect(((await refused.json()) as { message: string }).message).toMatch(/buffer full/);
    const timedOut = await held1;
    expect(timedOut.status).toBe(504);
    expect(((await timedOut.json()) as { message: string }).message).toMatch(/within 10 s/);
    expect((await held2).status).toBe(504);
  });

  it("gives a held request's place in the buffer back as soon as its client leaves", async () => {
    const d = await deploy('leave', 1, {}, { timeoutSeconds: 30 });
    const backlog = watch<ScaleBacklog>(messaging.subject(SCALE_BACKLOG));
    const reports = watch<LoadReport>(messaging.subject(LOAD_REPORT, [d.deploymentId]));
    const clients = [new AbortController(), new AbortController()];
    const held = clients.map((c) => call('/endpoint/leave', { signal: c.signal }).catch(() => undefined));
    await waitFor(
      'two held requests',
      async () => backlog.some((e) => e.deploymentId === d.deploymentId && e.heldRequests === 2),
      9000,
      50,
    );
    const leftAt = reports.length;
    for (const c of clients) c.abort();
    await Promise.all(held);
    // Not held until the 30 s timeout: the next report already counts none.
    await waitFor('a report of an empty buffer', async () => reports.slice(leftAt).some((r) => r.buffered === 0), 3000, 50);
    // The buffer (2 here) takes two more, instead of refusing them with 429.
    let served = 0;
    await route('c-leave', d.deploymentId, 1, 1, async (head, body, signal) => {
      served++;
      return echo('c-leave')(head, body, signal);
    });
    const after = await Promise.all([call('/endpoint/leave'), call('/endpoint/leave')]);
    expect(after.map((r) => r.status)).toEqual([200, 200]);
    expect(served).toBe(2);
  });

  it('answers 503 for a stopped deployment and quickly when the container is gone', async () => {
    await deploy('stopped', 1, { state: 'stopped' });
    const stopped = await waitFor('the stopped record', async () => {
      const res = await call('/endpoint/stopped');
      return res.status === 503 ? res : undefined;
    });
    expect(((await stopped.json()) as { message: string }).message).toMatch(/stopped/);

    const d = await deploy('ghost', 1);
    await route('c-ghost', d.deploymentId, 1, 1);
    await new Promise((r) => setTimeout(r, 300));
    const started = Date.now();
    const gone = await call('/endpoint/ghost');
    expect(gone.status).toBe(503);
    expect(Date.now() - started).toBeLessThan(2000);
    expect(((await gone.json()) as { message: string }).message).toMatch(/went away/);
  });

  it('refuses a 17 MB body with 413, announced or chunked', async () => {
    /** The gateway may answer and close before the whole body is written: a write error after the answer is expected. */
    const send = (chunked: boolean) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const headers: Record<string, string> = { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' };
        if (!chunked) headers['content-length'] = String(17 * 1024 * 1024);
        const req = httpRequest(`${base}/endpoint/echo`, { method: 'POST', headers }, (res) => {
          let body = '';
          res.on('data', (c) => (body += c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
          res.on('error', () => resolve({ status: res.statusCode ?? 0, body }));
        });
        req.on('error', (e) => setTimeout(() => reject(e), 500));
        const mb = Buffer.alloc(1024 * 1024, 0x20);
        for (let i = 0; i < 17; i++) req.write(mb);
        req.end();
      });
    for (const chunked of [true, false]) {
      const res = await send(chunked);
      expect(res.status).toBe(413);
      expect(res.body).toMatch(/16 MiB limit/);
    }
  });

  it('streams response chunks as the container produces them', async () => {
    const d = await deploy('sse', 1);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    await route('c-sse', d.deploymentId, 1, 1, async () => ({
      status: 200,
      headers: { 'content-type': 'text/event-stream' },
      body: (async function* () {
        yield Buffer.from('data: one\n\n');
        await gate;
        yield Buffer.from('data: two\n\n');
      })(),
    }));
    await new Promise((r) => setTimeout(r, 300));
    const res = await call('/endpoint/sse');
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const reader = res.body!.getReader();
    const first = await reader.read();
    expect(Buffer.from(first.value!).toString()).toBe('data: one\n\n');
    release();
    let rest = '';
    for (;;) {
      const next = await reader.read();
      if (next.done) break;
      rest += Buffer.from(next.value).toString();
    }
    expect(rest).toBe('data: two\n\n');
  });

  it("passes a client's hang-up on to the container at once and frees its slot", async () => {
    const d = await deploy('hangup', 1);
    const t = ticking('text/event-stream', 100, 100);
    await route('c-hangup', d.deploymentId, 1, 1, t.handler);
    await new Promise((r) => setTimeout(r, 300));
    const abort = new AbortController();
    const res = await call('/endpoint/hangup', { signal: abort.signal });
    const reader = res.body!.getReader();
    await reader.read();
    await reader.read();
    const hungUpAt = Date.now();
    abort.abort();
    const seen = await waitFor('the container told', async () => (t.calls[0]?.stoppedAt ? t.calls[0] : undefined), 5000, 20);
    // Told within a second of the hang-up, not at the end of its 10 s stream.
    expect(seen.stoppedAt - hungUpAt).toBeLessThan(1000);
    expect(seen.reason).toMatchObject({ code: 499 });
    // Its slot (capacity 1) is free again: the next request is served now, not in 10 s.
    const askedAt = Date.now();
    const next = await call('/endpoint/hangup');
    expect(next.status).toBe(200);
    expect(Date.now() - askedAt).toBeLessThan(3000);
    await next.body!.cancel();
  });

  it('lets a stream run past its timeout while it keeps sending; ends it at its max_duration with an error event', async () => {
    const d = await deploy('long', 1, {}, { timeoutSeconds: 1, idleTimeoutSeconds: 1 });
    const t = ticking('text/event-stream', 150, 15);
    await route('c-long', d.deploymentId, 1, 1, t.handler);
    await new Promise((r) => setTimeout(r, 300));
    const began = Date.now();
    const text = await (await call('/endpoint/long')).text();
    // 15 events over more than 2 s, twice the 1 s timeout: nothing cut.
    expect(Date.now() - began).toBeGreaterThan(2000);
    expect(text).toBe(Array.from({ length: 15 }, (_, i) => `data: ${i}\n\n`).join(''));

    const c = await deploy('capped', 1, {}, { timeoutSeconds: 1, idleTimeoutSeconds: 1, maxDurationSeconds: 2 });
    const capped = ticking('text/event-stream', 100, 1000);
    await route('c-capped', c.deploymentId, 1, 1, capped.handler);
    await new Promise((r) => setTimeout(r, 300));
    const cut = await (await call('/endpoint/capped')).text();
    const error = errorEvent(cut);
    expect(error).toEqual({
      error: { type: 'max_duration', code: 504, message: "the request passed 2 s in all (the deployment's max_duration)" },
    });
    await waitFor('the container told', async () => capped.calls[0].stoppedAt, 3000, 20);
  });

  it('ends a stalled stream after its idle_timeout: an error event for SSE, an aborted transfer otherwise; the container is told', async () => {
    const d = await deploy('stall', 1, {}, { timeoutSeconds: 5, idleTimeoutSeconds: 1 });
    const sse = ticking('text/event-stream', 50, 100, 2);
    await route('c-stall', d.deploymentId, 1, 1, sse.handler);
    await new Promise((r) => setTimeout(r, 300));
    const began = Date.now();
    const text = await (await call('/endpoint/stall')).text();
    const took = Date.now() - began;
    expect(took).toBeGreaterThan(900);
    expect(took).toBeLessThan(4000);
    expect(text.startsWith('data: 0\n\ndata: 1\n\nevent: error\n')).toBe(true);
    expect(errorEvent(text)).toEqual({
      error: { type: 'idle_timeout', code: 504, message: "the response sent nothing for 1 s (the deployment's idle_timeout)" },
    });
    await waitFor('the container told', async () => sse.calls[0].stoppedAt, 3000, 20);

    const n = await deploy('stall-ndjson', 1, {}, { timeoutSeconds: 5, idleTimeoutSeconds: 1 });
    const ndjson = ticking('application/x-ndjson', 50, 100, 2);
    await route('c-stall-ndjson', n.deploymentId, 1, 1, ndjson.handler);
    await new Promise((r) => setTimeout(r, 300));
    const res = await call('/endpoint/stall-ndjson');
    const reader = res.body!.getReader();
    let got = '';
    // Not a clean end: the chunked transfer is broken off, which the client sees as an error.
    await expect(
      (async () => {
        for (;;) {
          const next = await reader.read();
          if (next.done) return got;
          got += Buffer.from(next.value).toString();
        }
      })(),
    ).rejects.toThrow();
    expect(got).toBe('{"i":0}\n{"i":1}\n');
  });

  it('answers 504 when no response starts within the timeout, and tells the container', async () => {
    const d = await deploy('mute', 1, {}, { timeoutSeconds: 1 });
    const stoppedAt: number[] = [];
    await route('c-mute', d.deploymentId, 1, 1, async (_head, _body, signal) => {
      await new Promise((r) => signal.addEventListener('abort', r));
      stoppedAt.push(Date.now());
      throw new Error('stopped');
    });
    await new Promise((r) => setTimeout(r, 300));
    const res = await call('/endpoint/mute');
    expect(res.status).toBe(504);
    expect(((await res.json()) as { message: string }).message).toBe(
      `no response from "mute" v1 started within 1 s (the deployment's timeout)`,
    );
    await waitFor('the container told', async () => stoppedAt.length === 1, 3000, 20);
  });

  it('publishes a load report per version once a second', async () => {
    const d = await deploy('loaded', 1);
    const reports = watch<LoadReport>(messaging.subject(LOAD_REPORT, [d.deploymentId]));
    await route('c-loaded', d.deploymentId, 1, 2, echo('c-loaded'));
    await waitFor('a request served', async () => (await call('/endpoint/loaded')).status === 200);
    const report = await waitFor('a load report', async () => reports.find((r) => r.containers.length === 1));
    expect(report).toMatchObject({
      deploymentId: d.deploymentId,
      version: 1,
      buffered: 0,
      containers: [{ containerId: 'c-loaded', inFlight: 0 }],
    });
    expect(report.gatewayId).toMatch(/^gw-/);
  });
});
