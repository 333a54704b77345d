import { createUser } from '@nats-io/nkeys';
import * as contracts from '#tern/contracts';
import { runningGateway } from '../support/gateway.js';
import { createHash, randomBytes, randomInt } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';

/**
 * Random methods, paths, headers and bodies at every route of a running gateway, with a valid
 * admin token, a member token, a wrong one and none: no answer may be a 5xx and no connection
 * may be reset. Seeded: a failure prints the seed, and FUZZ_SEED=<seed> replays the same
 * requests (in the same order per worker; the gateway's state may differ in timing).
 */

const ADMIN = `tern_${'f'.repeat(43)}`;
const REQUESTS = Number(process.env.FUZZ_REQUESTS ?? 4000);
const WORKERS = 8;
/** Oversize bodies cost 16 MiB each on a 2-core machine: a few per run, a fixed number per worker so that a seed replays. */
const OVERSIZE_PER_WORKER = 1;
const BODY_LIMIT = 16 * 1024 * 1024;
/** Long polls (task wait, log follow) may hold a request; past this the fuzzer gives up on it, which is no failure. */
const REQUEST_TIMEOUT_MS = 8000;

/** A task queue the fuzzer deploys, so that task submissions reach the ledger (an endpoint would wait for capacity). */
const QUEUE = 'fuzzq';

/** Answers ≥ 500 that are the route's documented meaning, not a failure (by message; HEAD answers have none). */
const EXPECTED_5XX = [
  // Degraded: only the gateway runs.
  { path: /^\/health\/ready(\?|$)/, status: 503, message: /degraded/ },
  // A random POST …/fuzzq/stop stops the queue.
  { path: /^\/taskqueue\//, status: 503, message: /^task queue "fuzzq" is stopped: start it/ },
  // No machine joined: a sandbox has nowhere to run.
  { path: /^\/api\/v1\/sandboxes\/?(\?|$)/, status: 503, message: /^no machine in pool "[^"]+" can take the sandbox now/ },
  // No registry configured: a valid build has nowhere to go.
  { path: /^\/api\/v1\/images\/builds\/?(\?|$)/, status: 503, message: /^no image registry: set REGISTRY_URL/ },
];

/** Whether an answer fails the fuzz: a reset or other socket error (a long poll's timeout aside), or a 5xx that is not the route's meaning. */
function failed(req: { method: string; path: string }, answer: Answer): boolean {
  if (answer.error) return answer.error !== 'timeout';
  const expected = EXPECTED_5XX.some(
    (e) => e.status === answer.status && e.path.test(req.path) && (req.method === 'HEAD' || e.message.test(messageOf(answer))),
  );
  return answer.status! >= 500 && !expected;
}

/** mulberry32: small, seedable, good enough to pick inputs. */
function generator(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  const pick = <T>(items: readonly T[]): T => items[int(items.length)]!;
  const chance = (p: number) => next() < p;
  return { next, int, pick, chance };
}
type Gen = ReturnType<typeof generator>;

function uuid(g: Gen): string {
  const hex = Array.from({ length: 32 }, () => g.int(16).toString(16)).join('');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-a${hex.slice(17, 20)}-${hex.slice(20)}`;
}

/** Percent-encoded path or query text, nasty more often than not. */
const NASTY_SEGMENTS = [
  '%00',
  'a%00b',
  '%FF',
  'x%fe%ff',
  '%C0%80',
  '%ED%A0%80',
  '%F4%90%80%80',
  '..',
  '.',
  '%2e%2e',
  '%2F',
  '%',
  '%zz',
  '%0A',
  '%0D%0A',
  '%20',
  '-1',
  '0',
  '1e309',
  '99999999999999999999999',
  'NaN',
  'null',
  'undefined',
  '__proto__',
  'constructor',
  "'%3B--",
  '%F0%9F%98%80',
  encodeURIComponent('日本語'),
  'sha256:' + 'a'.repeat(64),
  'sha256:zz',
  '00000000-0000-0000-0000-000000000000',
  QUEUE,
  QUEUE,
];

function randomText(g: Gen): string {
  switch (g.int(6)) {
    case 0:
      return g.pick(NASTY_SEGMENTS);
    case 1:
      return 'x'.repeat(g.pick([64, 300, 2000, 6000]));
    case 2:
      return encodeURIComponent(
        String.fromCodePoint(...Array.from({ length: 1 + g.int(8) }, () => g.int(0x2ffff))).replace(/[\ud800-\udfff]/g, 'u'),
      );
    case 3:
      return uuid(g);
    case 4:
      return String(g.int(1000) - 10);
    default:
      return Array.from({ length: 1 + g.int(12) }, () => g.pick([...'abcdefghijklmnopqrstuvwxyz0123456789-_.'])).join('');
  }
}

/** A string value for a JSON body: NUL, lone surrogates, long, unicode, or plain. */
function randomString(g: Gen): string {
  return g.pick([
    () => 'a\u0000b',
    () => '\ud800',
    () => 'x\udc00y',
    () => '\u0000',
    () => 'x'.repeat(g.pick([10, 100, 300, 70_000])),
    () => '日本語 😀',
    () => '',
    () => 'default',
    () => 'admin',
    () => 'member',
    () => 'sha256:' + 'b'.repeat(64),
    () => uuid(g),
    () => '2026-01-01T00:00:00Z',
    () => 'not-a-date',
    () => randomText(g),
  ])();
}

function randomNumber(g: Gen): number | string {
  return g.pick([0, -1, 1, 1.5, 2 ** 31, 2 ** 53 + 1, 1e308, -1e308, 5e-324, 1e30]);
}

function randomJson(g: Gen, keys: string[], depth = 0): unknown {
  const kind = depth > 3 ? g.int(4) : g.int(7);
  switch (kind) {
    case 0:
      return randomString(g);
    case 1:
      return randomNumber(g);
    case 2:
      return g.pick([true, false, null]);
    case 3:
      return g.chance(0.5) ? randomString(g) : [];
    case 4:
      return Array.from({ length: g.int(4) }, () => randomJson(g, keys, depth + 1));
    default: {
      const o: Record<string, unknown> = {};
      for (let i = g.int(6); i > 0; i--) {
        const key = g.chance(0.75) && keys.length ? g.pick(keys) : randomString(g);
        o[key] = randomJson(g, keys, depth + 1);
      }
      return o;
    }
  }
}

interface Body {
  bytes?: Buffer;
  label: string;
}

function randomBody(g: Gen, keys: string[], oversize: () => boolean): Body {
  switch (g.int(12)) {
    case 0:
    case 1:
      return { label: 'none' };
    case 2:
      return { bytes: Buffer.from('{"name":'), label: 'invalid JSON' };
    case 3:
      return { bytes: Buffer.from([0x7b, 0x22, 0x6e, 0x22, 0x3a, 0x22, 0xff, 0xc0, 0x80, 0x22, 0x7d]), label: 'invalid UTF-8' };
    case 4:
      return { bytes: Buffer.from('{"name":"a\u0000b"}\u0000'), label: 'NUL bytes' };
    case 5: {
      const n = g.pick([65, 1000, 100_000]);
      return { bytes: Buffer.from('['.repeat(n) + ']'.repeat(n)), label: `nested ${n}` };
    }
    case 6:
      if (oversize()) return { bytes: Buffer.alloc(BODY_LIMIT + 1 + g.int(1024 * 1024), 0x20), label: 'oversize' };
      return { bytes: Buffer.from(JSON.stringify(randomJson(g, keys))), label: 'json' };
    case 8: {
      // Numbers JSON.stringify cannot write: past double precision, past its range.
      const key = keys.length ? g.pick(keys) : 'n';
      const n = g.pick(['123456789012345678901234567890', '1e400', '-1e400', '1' + '0'.repeat(400), '0.' + '0'.repeat(400) + '1']);
      return { bytes: Buffer.from(`{${JSON.stringify(key)}:${n}}`), label: 'big number' };
    }
    case 7:
      return { bytes: Buffer.from(Array.from({ length: g.int(2048) }, () => g.int(256))), label: 'random bytes' };
    default:
      return { bytes: Buffer.from(JSON.stringify(randomJson(g, keys))), label: 'json' };
  }
}

const CONTENT_TYPES = [
  'application/json',
  'application/json',
  'application/json',
  'application/json; charset=utf-8',
  'application/json; charset=latin1',
  'text/plain',
  'application/octet-stream',
  'application/gzip',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/xml',
  'application/vnd.api+json',
  'a/b;;;=',
  'json',
  '',
];

interface Route {
  method: string;
  template: string;
  query: string[];
}

interface Sent {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: Body;
}

interface Answer {
  status?: number;
  error?: string;
  body?: string;
  /** For an error: the earlier exchanges on the same connection. */
  history?: string[];
}

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS', 'SEARCH'];

function randomRequest(g: Gen, routes: Route[], keys: string[], tokens: string[], oversize: () => boolean): Sent {
  const route = g.pick(routes);
  const method = g.chance(0.75) ? route.method : g.pick(METHODS);
  let path = route.template.replace(/\{[^}]+\}/g, (param) => (param === '{name}' && g.chance(0.3) ? QUEUE : randomText(g)));
  if (g.chance(0.1)) path += '/' + randomText(g);
  const query: string[] = [];
  for (const name of route.query) if (g.chance(0.5)) query.push(`${name}=${randomText(g)}`);
  if (g.chance(0.15)) query.push(`${randomText(g)}=${randomText(g)}`);
  // Query DTOs are not in the OpenAPI document; their fields share names with the body schemas'.
  if (g.chance(0.3) && keys.length) query.push(`${g.pick(keys)}=${randomText(g)}`);
  if (query.length) path += '?' + query.join('&');

  const headers: Record<string, string> = {};
  const token = g.pick(tokens);
  if (token) headers.authorization = token;
  const body = ['GET', 'HEAD'].includes(method) && g.chance(0.8) ? { label: 'none' } : randomBody(g, keys, oversize);
  if (body.bytes || g.chance(0.2)) {
    const type = g.pick(CONTENT_TYPES);
    if (type) headers['content-type'] = type;
  }
  if (g.chance(0.1)) headers['x-fuzz'] = 'v'.repeat(g.pick([1, 1000, 6000]));
  if (g.chance(0.05)) headers.accept = g.pick(['*/*', 'text/event-stream', 'application/xml', 'x']);
  if (g.chance(0.05)) headers['x-forwarded-for'] = g.pick(['1.2.3.4', 'garbage', '::1, 10.0.0.1']);
  return { method, path, headers, body };
}

/** One request on its own connection-pooled agent; resets come back as `error`, never thrown. */
/** The `message` of a JSON answer, or its text. */
function messageOf(answer: Answer): string {
  try {
    const body = JSON.parse(answer.body ?? '') as { message?: unknown; status?: unknown };
    return String(body.message ?? body.status ?? '');
  } catch {
    return answer.body ?? '';
  }
}

const socketHistory = new WeakMap<object, string[]>();
const headerSizes = (headers: Record<string, string>) => Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, v.length]));

function send(base: URL, agent: http.Agent, req: Sent): Promise<Answer> {
  return new Promise((resolve) => {
    let settled = false;
    const done = (a: Answer) => {
      if (!settled) {
        settled = true;
        resolve(a);
      }
    };
    const r = http.request(
      {
        host: base.hostname,
        port: base.port,
        method: req.method,
        path: req.path,
        agent,
        headers: { ...req.headers, ...(req.body.bytes ? { 'content-length': String(req.body.bytes.length) } : {}) },
        timeout: REQUEST_TIMEOUT_MS,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => done({ status: res.statusCode, body: Buffer.concat(chunks).toString('utf8', 0, 4000) }));
        res.on('error', (e: NodeJS.ErrnoException) => done({ status: res.statusCode, error: e.code ?? e.message }));
      },
    );
    // A reset is often the fault of an earlier exchange on the same keep-alive connection.
    let history: string[] = [];
    r.on('socket', (socket) => {
      history = socketHistory.get(socket) ?? [];
      socketHistory.set(socket, history);
      history.push(`${req.method} ${req.path.slice(0, 80)} [${req.body.label}, headers ${JSON.stringify(headerSizes(req.headers))}]`);
      r.on('response', (res) => history.push(`  → ${res.statusCode} ${JSON.stringify(res.headers)}`));
    });
    r.on('timeout', () => {
      done({ error: 'timeout' });
      r.destroy();
    });
    r.on('error', (e: NodeJS.ErrnoException) => done({ error: e.code ?? e.message, history: history.slice(-7, -1) }));
    r.end(req.body.bytes);
  });
}

/** A 4 MiB body: past what the kernel buffers on a connection, so a refusal that closes under it resets the connection. */
const LARGE_BODY = Buffer.alloc(4 * 1024 * 1024, 0x20);
/** A body past the limit (shared by the requests that send one: they only read it). */
const OVERSIZE_BODY = Buffer.alloc(BODY_LIMIT + 1024 * 1024, 0x20);
/** A field value of 1 MiB. */
const HUGE_FIELD = 'x'.repeat(1024 * 1024);

/** What is wrong with the URL of a sweep request, in turn. */
const URL_DEFECTS = [
  { label: 'stray % in the path', param: '%zz' },
  { label: 'path not UTF-8', param: 'caf%E9' },
  { label: 'NUL in the path', param: 'a%00b' },
  { label: 'path parameter over the router bound', param: 'p'.repeat(101) },
  { label: 'query not UTF-8, stray %, NUL', param: 'fuzz', query: 'a=%E9&b=%zz&c=%00&%=1' },
] as const;

/** A user public key of the right shape whose checksum does not match (one character changed). */
function corruptedKey(): string {
  const key = createUser().getPublicKey();
  return key.slice(0, 10) + (key[10] === 'A' ? 'B' : 'A') + key.slice(11);
}

const INVENTORY = {
  hostname: 'fuzz-host',
  cpu: { model: 'cpu', cores: 1, threads: 2 },
  memoryBytes: 1024 ** 3,
  disks: [{ mount: '/', fsType: 'ext4', sizeBytes: 10, freeBytes: 5 }],
  os: { platform: 'linux', distro: 'debian', release: '12', kernel: '6.1', arch: 'x64' },
  networkInterfaces: [{ name: 'eth0', mac: '02:00:00:00:00:01', addresses: ['10.0.0.2'], speedMbps: null }],
  gpus: [
    {
      index: 0,
      vendor: 'nvidia',
      model: 'NVIDIA H100 80GB HBM3',
      memoryMiB: 81559,
      driverVersion: '550',
      cudaVersion: '12.4',
      uuid: 'GPU-1',
    },
  ],
};

/**
 * Bodies each route would take, so that one field made hostile at a time is what the route
 * sees past validation of the rest (a 1 MiB agentVersion got to NATS that way and came back 503).
 */
function validBodies(): Record<string, Record<string, unknown>> {
  const key = createUser().getPublicKey();
  return {
    'POST /api/v1/nats/users': { name: 'fuzz', allow: ['events'], publicKey: key },
    'POST /api/v1/machine/register': { machineId: 'fuzz-m', pool: 'default', agentVersion: '1', natsPublicKey: key, inventory: INVENTORY },
    'POST /api/v1/machine/keepalive': { machineId: 'fuzz-m', poolName: 'default', agentVersion: '1' },
    'POST /api/v1/tokens': { name: 'fuzz' },
    'POST /api/v1/workspaces': { name: 'fuzz-ws' },
    'POST /api/v1/pools': { name: 'fuzz-pool' },
    'POST /api/v1/machines': { pool: 'default' },
    'PUT /api/v1/secrets/{name}': { value: 'v' },
    'POST /api/v1/volumes': { name: 'fuzz-vol' },
  };
}

let machines = 0;
/** A registration body for a machine id of its own, so that no request meets another's machine (409) before its hostile field. */
function ownMachine(body: unknown): unknown {
  const b = body as { machineId?: unknown };
  return b.machineId === 'fuzz-m' ? { ...b, machineId: `fuzz-m${++machines}` } : body;
}

/** Every string in a JSON value, by its path, replaced in turn with `value`: one copy per string. */
function eachStringReplaced(body: unknown, value: string): unknown[] {
  if (typeof body === 'string') return [value];
  if (Array.isArray(body))
    return body.flatMap((item, i) => eachStringReplaced(item, value).map((v) => body.map((x, j) => (i === j ? v : x))));
  if (typeof body !== 'object' || body === null) return [];
  return Object.entries(body).flatMap(([k, item]) => eachStringReplaced(item, value).map((v) => ({ ...body, [k]: v })));
}

/** The request line and head as bytes (with a byte no URL may hold), then a body, on a socket of its own: the answer or the socket's error. */
function sendRaw(base: URL, method: string, path: Buffer, body: Buffer): Promise<Answer> {
  return new Promise((resolve) => {
    const socket = net.connect(Number(base.port), base.hostname);
    const chunks: Buffer[] = [];
    let error: string | undefined;
    socket.setTimeout(REQUEST_TIMEOUT_MS, () => {
      error = 'timeout';
      socket.destroy();
    });
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', (e: NodeJS.ErrnoException) => (error ??= e.code ?? e.message));
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('latin1');
      const status = /^HTTP\/1\.1 (\d{3})/.exec(text)?.[1];
      resolve(
        error || !status ? { error: error ?? 'no answer' } : { status: Number(status), body: text.slice(text.indexOf('\r\n\r\n') + 4) },
      );
    });
    socket.write(
      Buffer.concat([
        Buffer.from(`${method} `),
        path,
        Buffer.from(
          ` HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${ADMIN}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`,
        ),
      ]),
    );
    socket.end(body);
  });
}

interface Operation {
  method: string;
  template: string;
  query: string[];
  /** The names of its JSON body's fields: from the OpenAPI schema, or from the contract class of that name. */
  fields: string[];
}

/** The hostile requests of the sweep for one operation (the `index`th): URL defects, bodies too big, hostile fields. */
function hostileRequests(op: Operation, index: number, valid: Record<string, unknown> | undefined): Sent[] {
  const admin = { authorization: `Bearer ${ADMIN}` };
  const json = (value: unknown, label: string): Body => ({ bytes: Buffer.from(JSON.stringify(value)), label });
  const at = (param: string, query = '') => {
    const params = op.template.match(/\{[^}]+\}/g) ?? [];
    const path = params.length ? op.template.replace(/\{[^}]+\}/g, param) : `${op.template}/${param}`;
    return query ? `${path}?${query}` : path;
  };
  const plain = op.template.replace(/\{[^}]+\}/g, 'fuzz');
  const sent: Sent[] = URL_DEFECTS.map((d) => ({
    method: op.method,
    path: at(d.param, 'query' in d ? d.query : ''),
    headers: { ...admin, 'content-type': 'application/json' },
    body: json(valid ?? {}, d.label),
  }));
  // A body the client is still sending while the URL is refused, on a connection that closes after the answer.
  const defect = URL_DEFECTS[index % URL_DEFECTS.length]!;
  sent.push({
    method: op.method,
    path: at(defect.param, 'query' in defect ? defect.query : ''),
    headers: { ...admin, 'content-type': 'application/json', connection: 'close' },
    body: { bytes: LARGE_BODY, label: `4 MiB body, ${defect.label}` },
  });
  // Past the body limit, on every fourth operation (each costs 17 MiB on a 2-core machine).
  if (index % 4 === 0)
    sent.push({
      method: op.method,
      path: plain,
      headers: { ...admin, 'content-type': 'application/json', ...(index % 8 === 0 ? { connection: 'close' } : {}) },
      body: { bytes: OVERSIZE_BODY, label: 'body over the limit' },
    });
  sent.push({
    method: op.method,
    path: plain,
    headers: { ...admin, 'content-type': 'application/octet-stream' },
    body: json(valid ?? {}, 'JSON sent as bytes'),
  });
  const bad = corruptedKey();
  const postJson = (body: unknown, label: string) =>
    sent.push({ method: op.method, path: plain, headers: { ...admin, 'content-type': 'application/json' }, body: json(body, label) });
  // One field hostile at a time in a body the route would take, so the rest passes validation.
  for (const [value, label] of [
    [HUGE_FIELD, '1 MiB field'],
    [bad, 'bad nkey checksum'],
  ] as const)
    for (const body of valid ? eachStringReplaced(valid, value) : []) postJson(ownMachine(body), label);
  // 64 KiB each: past every bound, without building megabytes per field of a wide spec.
  for (const [value, label] of [
    [HUGE_FIELD.slice(0, 64 * 1024), 'every field 64 KiB'],
    [bad, 'every field a bad nkey checksum'],
    [{ $where: 1 }, 'every field an object'],
  ] as const)
    postJson(Object.fromEntries(op.fields.map((f) => [f, value])), label);
  for (const name of op.query)
    sent.push({ method: op.method, path: `${plain}?${name}=${HUGE_FIELD.slice(0, 4000)}`, headers: admin, body: { label: 'none' } });
  return sent;
}

/** The operations of the gateway's OpenAPI document. */
async function operations(base: URL): Promise<Operation[]> {
  const spec = (await (await fetch(new URL('/docs-json', base))).json()) as {
    paths: Record<
      string,
      Record<
        string,
        { parameters?: { in: string; name: string }[]; requestBody?: { content?: Record<string, { schema?: { $ref?: string } }> } }
      >
    >;
    components: { schemas: Record<string, { properties?: Record<string, unknown> }> };
  };
  return Object.entries(spec.paths).flatMap(([template, ops]) =>
    Object.entries(ops).map(([method, op]) => {
      const ref = op.requestBody?.content?.['application/json']?.schema?.$ref?.split('/').pop();
      const documented = Object.keys((ref && spec.components.schemas[ref]?.properties) ?? {});
      // Contract classes (libs/contracts) carry no OpenAPI properties: their validators name the fields.
      const cls = ref && !documented.length ? (contracts as Record<string, unknown>)[ref] : undefined;
      const fields = typeof cls === 'function' ? contracts.describeFields(cls as contracts.Class<object>).map((f) => f.name) : documented;
      return {
        method: method.toUpperCase(),
        template,
        query: (op.parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name),
        fields,
      };
    }),
  );
}

describe('gateway fuzz: no 5xx, no reset', () => {
  // With a key, so that the secrets routes run instead of answering that secrets are off.
  const gateway = runningGateway('fuzz', ADMIN, { SECRETS_KEY: randomBytes(32).toString('base64') });
  let base: URL;

  beforeAll(() => {
    base = new URL(gateway.base);
  });

  /** The gateway's first error records, or its last lines if it exited. */
  const gatewayErrors = () =>
    gateway.process.running
      ? gateway.process
          .records()
          .filter((r) => Number(r.level) >= 50)
          .slice(0, 5)
          .map((r) => JSON.stringify(r).slice(0, 1500))
      : ['the gateway exited:', ...gateway.process.lines.slice(-30)];

  it(`answers ${REQUESTS} random requests at every route with no 5xx and no reset`, async () => {
    const seed = Number(process.env.FUZZ_SEED ?? randomInt(2 ** 31));
    const spec = (await (await fetch(new URL('/docs-json', base))).json()) as {
      paths: Record<string, Record<string, { parameters?: { in: string; name: string }[] }>>;
      components: { schemas: Record<string, { properties?: Record<string, unknown> }> };
    };
    const routes: Route[] = Object.entries(spec.paths).flatMap(([template, ops]) =>
      Object.entries(ops).map(([method, op]) => ({
        method: method.toUpperCase(),
        template,
        query: (op.parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name),
      })),
    );
    // Routes outside the OpenAPI document, and none at all.
    routes.push({ method: 'GET', template: '/metrics', query: [] }, { method: 'GET', template: '/{x}/{y}', query: [] });
    expect(routes.length).toBeGreaterThan(40);
    const keys = [...new Set(Object.values(spec.components.schemas).flatMap((s) => Object.keys(s.properties ?? {})))];

    const created = await fetch(new URL('/api/v1/tokens', base), {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'fuzz member' }),
    });
    const member = ((await created.json()) as { token: string }).token;
    const bundle = Buffer.from('fuzz');
    const code = `sha256:${createHash('sha256').update(bundle).digest('hex')}`;
    const admin = { authorization: `Bearer ${ADMIN}` };
    const upload = await fetch(new URL(`/api/v1/code/${code}`, base), {
      method: 'PUT',
      headers: { ...admin, 'content-type': 'application/gzip' },
      body: bundle,
    });
    expect(upload.status).toBe(201);
    const deployed = await fetch(new URL('/api/v1/deployments', base), {
      method: 'POST',
      headers: { ...admin, 'content-type': 'application/json' },
      body: JSON.stringify({ name: QUEUE, kind: 'task_queue', handler: 'app.py:predict', code }),
    });
    expect(deployed.status).toBe(201);
    const tokens = [
      `Bearer ${ADMIN}`,
      `Bearer ${ADMIN}`,
      `Bearer ${member}`,
      '',
      'Bearer tern_wrong',
      'Basic Zm9vOmJhcg==',
      'Bearer ' + 'x'.repeat(5000),
    ];

    const failures: string[] = [];
    const statuses = new Map<number | string, number>();
    const agent = new http.Agent({ keepAlive: true, maxSockets: WORKERS });
    const started = Date.now();
    await Promise.all(
      Array.from({ length: WORKERS }, async (_, w) => {
        const g = generator(seed + w);
        let oversizeLeft = OVERSIZE_PER_WORKER;
        const oversize = () => oversizeLeft-- > 0;
        for (let i = w; i < REQUESTS; i += WORKERS) {
          const req = randomRequest(g, routes, keys, tokens, oversize);
          const answer = await send(base, agent, req);
          const key = answer.status ?? answer.error ?? '?';
          statuses.set(key, (statuses.get(key) ?? 0) + 1);
          if (failed(req, answer)) {
            const what = answer.error
              ? `${answer.error}; earlier on this connection:\n      ${answer.history?.join('\n      ')}`
              : `${answer.status} ${answer.body?.slice(0, 300)}`;
            failures.push(
              `worker ${w} #${i}: ${req.method} ${req.path.slice(0, 200)} [${req.body.label}, ${req.headers['content-type'] ?? 'no type'}] → ${what}`,
            );
          }
        }
      }),
    );
    agent.destroy();
    const summary = `seed ${seed} (replay: FUZZ_SEED=${seed}), ${REQUESTS} requests in ${Date.now() - started} ms, answers ${JSON.stringify(Object.fromEntries(statuses))}`;
    process.stdout.write(`${summary}\n`);
    if (failures.length) {
      const errors = gatewayErrors();
      throw new Error(
        `${failures.length} failures, ${summary}:\n${failures.slice(0, 40).join('\n')}\ngateway errors:\n${errors.join('\n')}`,
      );
    }
  }, 120_000);

  it('sends every operation of the OpenAPI document hostile input: bad percent-encoding, bytes no URL may hold, large and oversize bodies, oversize fields, bad nkey checksums', async () => {
    const ops = await operations(base);
    expect(ops.length).toBeGreaterThan(100);
    const valid = validBodies();
    for (const key of Object.keys(valid)) expect(ops.map((o) => `${o.method} ${o.template}`)).toContain(key);
    const jobs = ops.flatMap((op, i) => hostileRequests(op, i, valid[`${op.method} ${op.template}`]).map((req) => ({ op, req })));
    // Bytes no URL may hold, on every operation: Node's parser refuses the request line.
    const raw = ops.map((op, i) => ({
      op,
      path: Buffer.concat([Buffer.from(op.template.replace(/\{[^}]+\}/g, 'x') + '/caf'), Buffer.from([0xe9])]),
      body: i % 2 ? LARGE_BODY : Buffer.from('{}'),
    }));
    const agent = new http.Agent({ keepAlive: true, maxSockets: WORKERS });
    const failures: string[] = [];
    const covered = new Set<string>();
    const statuses = new Map<number | string, number>();
    const count = (a: Answer) => statuses.set(a.status ?? a.error ?? '?', (statuses.get(a.status ?? a.error ?? '?') ?? 0) + 1);
    let next = 0;
    const started = Date.now();
    await Promise.all(
      Array.from({ length: WORKERS }, async () => {
        while (next < jobs.length + raw.length) {
          const i = next++;
          if (i < jobs.length) {
            const { op, req } = jobs[i]!;
            const answer = await send(base, agent, req);
            count(answer);
            covered.add(`${op.method} ${op.template}`);
            if (failed(req, answer))
              failures.push(
                `${req.method} ${req.path.slice(0, 160)} [${req.body.label}] → ${answer.error ?? `${answer.status} ${answer.body?.slice(0, 300)}`}` +
                  // A reset is often the fault of an earlier exchange on the same keep-alive connection.
                  (answer.history?.length ? `\n    earlier on its connection: ${answer.history.join('\n      ')}` : ''),
              );
          } else {
            const { op, path, body } = raw[i - jobs.length]!;
            const answer = await sendRaw(base, op.method, path, body);
            count(answer);
            if (answer.error || answer.status !== 400)
              failures.push(
                `${op.method} ${path.toString('latin1')} [raw byte, ${body.length} B body] → ${answer.error ?? `${answer.status} ${answer.body?.slice(0, 300)}`}`,
              );
          }
        }
      }),
    );
    agent.destroy();
    expect(covered.size).toBe(ops.length);
    const summary = `${jobs.length + raw.length} requests at ${ops.length} operations in ${Date.now() - started} ms, answers ${JSON.stringify(Object.fromEntries(statuses))}`;
    process.stdout.write(`${summary}\n`);
    if (failures.length)
      throw new Error(
        `${failures.length} failures, ${summary}:\n${failures.slice(0, 40).join('\n')}\ngateway errors:\n${gatewayErrors().join('\n')}`,
      );
  }, 240_000);
});
