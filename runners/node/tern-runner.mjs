#!/usr/bin/env node
// Tern's Node runner: serves a user's handler under the container contract.
//
//   GET  /health  503 while the module loads and on_start runs, 200 once ready
//   HEAD          as GET, without the body
//   POST <any>    JSON body -> await handler(payload) -> JSON (200); an (async) iterator result
//                 is streamed (chunked NDJSON, or SSE when the request accepts text/event-stream);
//                 400 for a body that is not JSON, 500 {"error", "type"} when the handler throws
//                 (and "traceback" for a task's call). tern.HTTPError thrown: its status and
//                 {"error": message}; tern.Response returned: its status, headers and body.
//                 A client that hangs up mid-stream stops it: the iterator is returned (its
//                 `finally` runs) at its next item, and the runner logs it.
//                 A task's call may carry a bunch of tasks, map chunks or plain payloads
//                 ({"__tern_map_bunch__": [{task_id, attempt, payload}, ...], "budget_ms"}): they
//                 run in turn, the answer streaming two NDJSON lines per task: {task_id, begun:
//                 true} as it begins, {task_id, status, body} as it ends (what its own call would
//                 have answered; a streamed result as the list of its items); none begins once
//                 the call has run budget_ms. Task answers say so (x-tern-bunches: 2; an older
//                 runner's 1 took map chunks only), so an agent sends bunches only to a runner
//                 that takes them.
//
// Environment: TERN_HANDLER ("app.js:predict" or "app.mjs:predict"), TERN_ON_START (optional),
// PORT, TERN_WORKERS (processes, default 1), TERN_CONCURRENCY (requests each process handles at
// once, default 1; more wait in a queue), TERN_DEPLOYMENT_KIND. The module is imported from the
// working directory. Task queues (task_queue) always run workers under a primary, so a task whose
// caller hangs up (cancel, timeout) can end its worker and a fresh one takes its place.
//
// Node builtins only. Unlike Python, Node cannot fork a process with memory already loaded:
// with TERN_WORKERS > 1 every worker (node:cluster) imports the module and runs on_start itself,
// so on_start runs once per worker process. The default of one worker with concurrency > 1 is
// the usual shape for Node (one event loop, many requests in flight).
import cluster from 'node:cluster';
import http from 'node:http';
import { resolve as resolvePath } from 'node:path';
import { pathToFileURL } from 'node:url';
import tern from './tern.mjs';

// Handlers reach Tern's helpers without an import: tern.volume.commit().
globalThis.tern = tern;

const IDLE_TIMEOUT_MS = 75_000;

// Functions pull tasks too (one call, or one chunk of a map, per task).
const TASK_QUEUE = ['task_queue', 'function'].includes(process.env.TERN_DEPLOYMENT_KIND);

const MAP_CHUNK_KEY = '__tern_map_chunk__';
const MAP_BUNCH_KEY = '__tern_map_bunch__';
/** What task answers say in x-tern-bunches: bunches of map chunks and of plain tasks (1: map chunks only). */
const BUNCHES = '2';

/**
 * A map's chunk (one task): the handler once per input; [{status: 'ok', result} | {status: 'error', error}].
 * With return_exceptions an input's error is kept in its place; without, the first one fails the
 * chunk (its task is retried, then the map fails), naming the input's place in the chunk.
 */
async function runChunk(handler, chunk) {
  const outcomes = [];
  for (const [i, input] of (chunk.inputs ?? []).entries()) {
    try {
      let value = await handler(input);
      if (isStream(value)) {
        const items = [];
        for await (const item of value) items.push(item);
        value = items;
      }
      outcomes.push({ status: 'ok', result: JSON.parse(JSON.stringify(value ?? null)) });
    } catch (e) {
      const message = `${e?.name ?? 'Error'}: ${e?.message ?? String(e)}`;
      if (!chunk.return_exceptions) {
        const failed = new Error(`input ${i} of the chunk: ${message}`, { cause: e });
        failed.name = 'MapInputError';
        throw failed;
      }
      console.error(e?.stack ?? String(e));
      outcomes.push({ status: 'error', error: message });
    }
  }
  return outcomes;
}

/** One task of a bunch (a map chunk or a plain payload), run: {task_id, status, body} as its own call would have answered. */
async function bunchLine(handler, member) {
  const chunk = member?.payload?.[MAP_CHUNK_KEY];
  const line = { task_id: member?.task_id };
  try {
    if (chunk && typeof chunk === 'object') return { ...line, status: 200, body: await runChunk(handler, chunk) };
    const [status, body] = await plainResult(await handler(member?.payload));
    // A result that is not JSON fails here, as its own call's would.
    return { ...line, status, body: JSON.parse(JSON.stringify(body ?? null)) };
  } catch (e) {
    if (e?.ternHttpError) return { ...line, status: e.status, body: e.body ?? { error: e.message } };
    return { ...line, status: 500, body: taskFailure(e) };
  }
}

/** A plain task's result as a bunch's line carries it: [status, body]; a stream as the list of its items. */
async function plainResult(result) {
  const [status, body] = result?.ternResponse ? [result.status, await result.body] : [200, result];
  if (!isStream(body)) return [status, body];
  const items = [];
  for await (const item of body) items.push(item);
  return [status, items];
}

/** What a task's raised error is answered with (500), logged: its types and traceback too. */
function taskFailure(e) {
  console.error(e?.stack ?? String(e));
  return { ...errorBody(e), ...(e?.stack ? { types: errorTypes(e), traceback: String(e.stack).slice(-8000) } : {}) };
}

function envInt(name, fallback) {
  const raw = process.env[name] ?? '';
  if (!raw) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) {
    console.error(`tern-runner: ${name}=${JSON.stringify(raw)} must be a whole number of at least 1`);
    process.exit(78);
  }
  return n;
}

/** "app.js:predict" / "lib/app.mjs:handlers.predict" -> the function, imported from the cwd. */
async function resolveRef(ref, what) {
  const i = ref.lastIndexOf(':');
  const [file, attr] = i > 0 ? [ref.slice(0, i), ref.slice(i + 1)] : ['', ''];
  if (!file || !attr) throw new Error(`${what} "${ref}" must look like "app.js:predict"`);
  const mod = await import(pathToFileURL(resolvePath(process.cwd(), file)).href);
  let target = mod;
  for (const part of attr.split('.')) {
    // A CommonJS module's exports arrive as `default`.
    target = target?.[part] ?? (target === mod ? mod.default?.[part] : undefined);
  }
  if (typeof target !== 'function') throw new Error(`${what} "${ref}": ${file} exports no function "${attr}"`);
  return target;
}

/** At most `limit` requests run the handler at once; the rest wait their turn. */
function limiter(limit) {
  let active = 0;
  const waiting = [];
  return {
    async run(fn) {
      if (active >= limit) await new Promise((r) => waiting.push(r));
      active++;
      try {
        return await fn();
      } finally {
        active--;
        waiting.shift()?.();
      }
    },
  };
}

const isStream = (v) =>
  v != null &&
  typeof v === 'object' &&
  (typeof v[Symbol.asyncIterator] === 'function' || (typeof v.next === 'function' && typeof v[Symbol.iterator] === 'function'));

function encodeItem(item, sse) {
  const text =
    Buffer.isBuffer(item) || item instanceof Uint8Array
      ? Buffer.from(item).toString()
      : typeof item === 'string'
        ? item
        : JSON.stringify(item);
  if (sse)
    return (
      text
        .split('\n')
        .map((l) => `data: ${l}\n`)
        .join('') + '\n'
    );
  return typeof item === 'string' || Buffer.isBuffer(item) ? text : `${text}\n`;
}

function sendJson(res, status, obj, headers = {}) {
  const data = Buffer.from(JSON.stringify(obj));
  res.writeHead(status, { ...headers, 'content-type': 'application/json', 'content-length': data.length });
  res.end(data);
}

// The runner frames the answer itself: a handler's headers do not choose these.
const FRAMING_HEADERS = new Set(['content-length', 'transfer-encoding', 'connection', 'keep-alive']);

/** A handler's headers as the runner sends them: lower-case names, framing ones left out. */
function ownHeaders(headers) {
  const out = {};
  for (const [name, value] of Object.entries(headers ?? {})) {
    if (!FRAMING_HEADERS.has(name.toLowerCase())) out[name.toLowerCase()] = String(value);
  }
  return out;
}

/** A tern.Response: bytes and strings as they are, an iterator streamed, the rest JSON. */
async function sendResponse(req, res, r) {
  const headers = ownHeaders(r.headers);
  const body = await r.body;
  if (isStream(body)) return stream(req, res, body, r.status, headers, r.mediaType);
  let data;
  let type;
  if (body === undefined || body === null) [data, type] = [Buffer.alloc(0), 'text/plain; charset=utf-8'];
  else if (Buffer.isBuffer(body) || body instanceof Uint8Array) [data, type] = [Buffer.from(body), 'application/octet-stream'];
  else if (typeof body === 'string') [data, type] = [Buffer.from(body), 'text/plain; charset=utf-8'];
  else [data, type] = [Buffer.from(JSON.stringify(body)), 'application/json'];
  res.writeHead(r.status, { ...headers, 'content-type': headers['content-type'] ?? r.mediaType ?? type, 'content-length': data.length });
  res.end(data);
}

/** The error's class and those it derives from, by name (the task policy's no_retry_on matches any); a map input's too. */
function errorTypes(e) {
  const names = e?.name === 'MapInputError' && e.cause && typeof e.cause === 'object' ? errorTypes(e.cause) : [];
  // An error's own name (a RangeError, or a plain Error named by its thrower).
  if (typeof e?.name === 'string' && !names.includes(e.name)) names.push(e.name);
  for (let p = Object.getPrototypeOf(e); p && p !== Object.prototype; p = Object.getPrototypeOf(p)) {
    const name = p.constructor?.name;
    if (name && !names.includes(name)) names.push(name);
  }
  return names;
}

function errorBody(e) {
  return { error: (e && e.message) || String(e), type: (e && e.constructor && e.constructor.name) || 'Error' };
}

async function readBody(req) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  return Buffer.concat(chunks);
}

async function stream(req, res, items, status = 200, headers = {}, mediaType = undefined) {
  const sse = (mediaType ?? req.headers.accept ?? '').includes('text/event-stream');
  res.writeHead(status, {
    'cache-control': 'no-cache',
    ...headers,
    'content-type': headers['content-type'] ?? mediaType ?? (sse ? 'text/event-stream' : 'application/x-ndjson'),
  });
  let sent = 0;
  const hungUp = () => !res.writableFinished && (res.destroyed || req.socket.destroyed);
  // A wait for 'drain' must end when the client goes: no drain comes then, and the slot is held.
  const closed = new Promise((r) => res.once('close', r));
  try {
    for await (const item of items) {
      // Leaving the loop returns the iterator: the handler's generator runs its `finally`.
      if (hungUp()) break;
      // Respect back-pressure: a slow reader slows the generator instead of filling memory.
      if (!res.write(encodeItem(item, sse))) await Promise.race([new Promise((r) => res.once('drain', r)), closed]);
      sent++;
    }
    if (hungUp())
      console.error(`tern-runner: the client of ${req.method} ${req.url} hung up after ${sent} item(s); stopped the handler's stream`);
  } catch (e) {
    console.error(e?.stack ?? String(e));
    if (sse) res.write(`event: error\ndata: ${JSON.stringify(errorBody(e))}\n\n`);
  }
  res.end();
}

async function serve() {
  const port = envInt('PORT', 8000);
  const slots = limiter(envInt('TERN_CONCURRENCY', 1));
  let handler;

  const server = http.createServer(async (req, res) => {
    const started = performance.now();
    res.on('finish', () =>
      console.log(`${req.method} ${req.url} ${res.statusCode} ${(performance.now() - started).toFixed(1)}ms pid=${process.pid}`),
    );
    const path = (req.url ?? '/').split('?')[0];
    // HEAD as GET: node:http leaves the body out of a HEAD answer.
    const get = req.method === 'GET' || req.method === 'HEAD';
    if (get && path === '/health') return sendJson(res, handler ? 200 : 503, { status: handler ? 'ok' : 'starting' });
    if (req.method !== 'POST') return sendJson(res, 405, { error: 'use POST / to call the handler, GET /health for health' });
    const body = await readBody(req).catch(() => undefined);
    if (!body) return;
    if (!handler) return sendJson(res, 503, { error: 'the handler is still starting' });
    let payload;
    try {
      payload = body.length && body.toString().trim() ? JSON.parse(body.toString()) : {};
    } catch (e) {
      return sendJson(res, 400, { error: `request body is not valid JSON: ${e.message}` });
    }
    // Task queues: a caller that hangs up mid-task (cancel, timeout) ends this worker, and the
    // primary forks a fresh one: a JavaScript handler cannot be interrupted any other way.
    if (TASK_QUEUE && req.headers['x-tern-task-id']) {
      res.on('close', () => {
        if (res.writableFinished) return;
        console.error(
          `tern-runner: the caller of task ${req.headers['x-tern-task-id']} hung up (cancelled or timed out); ending worker ${process.pid}`,
        );
        process.exit(3);
      });
    }
    const taskCall = TASK_QUEUE && Boolean(req.headers['x-tern-task-id']);
    if (taskCall) res.setHeader('x-tern-bunches', BUNCHES);
    const chunk = taskCall ? payload?.[MAP_CHUNK_KEY] : undefined;
    const bunch = taskCall ? payload?.[MAP_BUNCH_KEY] : undefined;
    await slots.run(async () => {
      if (Array.isArray(bunch)) {
        res.writeHead(200, { 'content-type': 'application/x-ndjson' });
        // The head leaves now: the agent counts the first chunk's time from it.
        res.flushHeaders();
        const began = performance.now();
        const budget = payload.budget_ms;
        for (const member of bunch) {
          if (typeof budget === 'number' && performance.now() - began >= budget) break;
          res.write(`${JSON.stringify({ task_id: member?.task_id, begun: true })}\n`);
          res.write(`${JSON.stringify(await bunchLine(handler, member))}\n`);
        }
        return res.end();
      }
      let result;
      try {
        result = chunk && typeof chunk === 'object' ? await runChunk(handler, chunk) : await handler(payload);
      } catch (e) {
        if (e?.ternHttpError) return sendJson(res, e.status, e.body ?? { error: e.message }, ownHeaders(e.headers));
        if (taskCall) return sendJson(res, 500, taskFailure(e));
        console.error(e?.stack ?? String(e));
        return sendJson(res, 500, errorBody(e));
      }
      if (result?.ternResponse) return sendResponse(req, res, result);
      if (isStream(result)) return stream(req, res, result);
      let data;
      try {
        data = JSON.stringify(result ?? null);
      } catch (e) {
        return sendJson(res, 500, { error: `handler result is not JSON-serialisable: ${e.message}`, type: 'TypeError' });
      }
      sendJson(res, 200, JSON.parse(data));
    });
  });
  server.keepAliveTimeout = IDLE_TIMEOUT_MS;

  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    // Stop accepting, close idle keep-alive connections, let in-flight requests finish.
    server.close(() => process.exit(0));
    server.closeIdleConnections();
    // Connections that finish a request from now on are closed rather than kept alive.
    server.on('request', (_req, res) => res.setHeader('connection', 'close'));
    const sweep = setInterval(() => server.closeIdleConnections(), 100);
    sweep.unref();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);

  // Listen first: /health answers 503 while the module loads and on_start runs.
  await new Promise((resolve, reject) => server.once('error', reject).listen(port, '0.0.0.0', resolve));
  const handlerRef = process.env.TERN_HANDLER ?? '';
  const onStartRef = process.env.TERN_ON_START ?? '';
  try {
    if (!handlerRef) throw new Error('TERN_HANDLER is not set (e.g. app.js:predict)');
    const fn = await resolveRef(handlerRef, 'TERN_HANDLER');
    if (onStartRef) {
      const began = performance.now();
      await (
        await resolveRef(onStartRef, 'TERN_ON_START')
      )();
      console.log(`tern-runner: on_start ${onStartRef} done in ${((performance.now() - began) / 1000).toFixed(2)}s pid=${process.pid}`);
    }
    handler = fn;
  } catch (e) {
    console.error(`tern-runner: start-up failed: ${e?.stack ?? e}`);
    process.exit(1);
  }
  console.log(`tern-runner: serving ${handlerRef} on port ${port} pid=${process.pid}`);
  process.send?.({ tern: 'ready' });
}

function primary(workers) {
  // Workers share the port through the primary (node:cluster round-robin on Linux).
  for (let i = 0; i < workers; i++) cluster.fork();
  let stopping = false;
  const stop = () => {
    stopping = true;
    for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGTERM');
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  cluster.on('exit', (worker, code, signal) => {
    if (stopping) {
      if (!Object.keys(cluster.workers ?? {}).length) process.exit(process.exitCode ?? 0);
      return;
    }
    // A worker that crashed under load: keep the container serving. One that failed at
    // start-up (import error, on_start threw) would only fail again: end the container.
    if (code === 1 && !worker.ready) {
      console.error(`tern-runner: worker ${worker.process.pid} failed to start; stopping`);
      stop();
      process.exitCode = 1;
      return;
    }
    console.error(`tern-runner: worker ${worker.process.pid} ended (${signal ?? code}); starting another`);
    cluster.fork();
  });
  cluster.on('message', (worker, msg) => {
    if (msg?.tern === 'ready') worker.ready = true;
  });
  console.log(`tern-runner: ${workers} workers (on_start runs once in each)`);
}

const workers = envInt('TERN_WORKERS', 1);
if ((workers > 1 || TASK_QUEUE) && cluster.isPrimary) primary(workers);
else await serve();
