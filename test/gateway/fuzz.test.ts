import { runningGateway } from '../support/gateway.js';
import { createHash, randomInt } from 'node:crypto';
import http from 'node:http';

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

describe('gateway fuzz: no 5xx, no reset', () => {
  const gateway = runningGateway('fuzz', ADMIN);
  let base: URL;

  beforeAll(() => {
    base = new URL(gateway.base);
  });

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
          const expected = EXPECTED_5XX.some(
            (e) => e.status === answer.status && e.path.test(req.path) && (req.method === 'HEAD' || e.message.test(messageOf(answer))),
          );
          const bad = answer.error ? answer.error !== 'timeout' : answer.status! >= 500 && !expected;
          if (bad) {
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
      const errors = gateway.process.running
        ? gateway.process
            .records()
            .filter((r) => Number(r.level) >= 50)
            .slice(0, 5)
            .map((r) => JSON.stringify(r).slice(0, 1500))
        : ['the gateway exited:', ...gateway.process.lines.slice(-30)];
      throw new Error(
        `${failures.length} failures, ${summary}:\n${failures.slice(0, 40).join('\n')}\ngateway errors:\n${errors.join('\n')}`,
      );
    }
  }, 120_000);
});
