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

  it('routes by name to the latest version and by /v<N> to a pinned one, body byte-for-byte', async () => {
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
    expect(latest.headers.get('x-path')).toBe('/hello/world?x=1');
    expect(latest.headers.get('content-type')).toBe('application/json');
    expect(latest.headers.get('x-tern-request-id')).toMatch(/^[0-9a-f]{32}$/);
    expect(latest.headers.get('connection')).not.toBe('close-me');
    expect(await latest.text()).toBe(json);

    const bytes = Buffer.from([0, 255, 1, 254, 10, 13]);
    const pinned = await call('/endpoint/echo/v1', { method: 'PUT', body: bytes, headers: { 'content-type': 'image/png' } });
    expect(pinned.headers.get('x-served-by')).toBe('c-echo-1');
    expect(pinned.headers.get('x-path')).toBe('/');
    expect(Buffer.from(await pinned.arrayBuffer()).equals(bytes)).toBe(true);

    const missing = await call('/endpoint/echo/v9');
    expect(missing.status).toBe(404);
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
