import { RunnerProcess, type RunnerLanguage } from './runner-process.js';

/** The same app in both languages: a slow on_start, a handler that echoes, fails or sleeps, a generator. */
const APPS: Record<RunnerLanguage, { files: Record<string, string>; handler: string; onStart: string; stream: string; long: string }> = {
  python: {
    files: {
      'app.py': `
import os, time
import tern
state = {"loaded": 0}
def load():
    time.sleep(float(os.environ.get("LOAD_SECONDS", "0")))
    state["loaded"] += 1
    state["loaded_in"] = os.getpid()
def predict(p):
    if p.get("fail"):
        raise ValueError("bad input: " + p["fail"])
    if p.get("status"):
        raise tern.HTTPError(p["status"], p.get("message", ""), headers={"Retry-After": "3", "Content-Length": "999"})
    if p.get("created"):
        return tern.Response({"id": p["created"]}, status=201, headers={"Location": "/items/" + p["created"]})
    if p.get("csv"):
        return tern.Response(p["csv"], status=202, media_type="text/csv")
    if p.get("sleep"):
        time.sleep(p["sleep"])
    return {"echo": p, "loaded": state["loaded"], "loaded_in": state.get("loaded_in"), "pid": os.getpid()}
def stream(p):
    for i in range(p.get("n", 3)):
        yield {"i": i}
        time.sleep(0.05)
def long(p):
    try:
        for i in range(p.get("n", 100)):
            yield {"i": i}
            time.sleep(0.1)
    finally:
        print("long stream closed", flush=True)
`,
    },
    handler: 'app.py:predict',
    onStart: 'app.py:load',
    stream: 'app.py:stream',
    long: 'app.py:long',
  },
  node: {
    files: {
      'app.mjs': `
const state = { loaded: 0 };
const sleep = (s) => new Promise((r) => setTimeout(r, s * 1000));
export async function load() {
  await sleep(Number(process.env.LOAD_SECONDS ?? '0'));
  state.loaded += 1;
  state.loaded_in = process.pid;
}
export async function predict(p) {
  if (p.fail) throw new RangeError('bad input: ' + p.fail);
  if (p.status) throw new tern.HTTPError(p.status, p.message, { headers: { 'Retry-After': '3', 'Content-Length': '999' } });
  if (p.created) return new tern.Response({ id: p.created }, { status: 201, headers: { Location: '/items/' + p.created } });
  if (p.csv) return new tern.Response(p.csv, { status: 202, mediaType: 'text/csv' });
  if (p.sleep) await sleep(p.sleep);
  return { echo: p, loaded: state.loaded, loaded_in: state.loaded_in ?? null, pid: process.pid };
}
export async function* stream(p) {
  for (let i = 0; i < (p.n ?? 3); i++) {
    yield { i };
    await sleep(0.05);
  }
}
export async function* long(p) {
  try {
    for (let i = 0; i < (p.n ?? 100); i++) {
      yield { i };
      await sleep(0.1);
    }
  } finally {
    console.log('long stream closed');
  }
}
`,
    },
    handler: 'app.mjs:predict',
    onStart: 'app.mjs:load',
    stream: 'app.mjs:stream',
    long: 'app.mjs:long',
  },
};

const ERROR_TYPE: Record<RunnerLanguage, string> = { python: 'ValueError', node: 'RangeError' };

describe.each(['python', 'node'] as const)('%s runner', (language) => {
  const app = APPS[language];
  let runner: RunnerProcess | undefined;
  const start = (env: Record<string, string>) => (runner = new RunnerProcess(language, app.files)).start(env);

  afterEach(async () => {
    await runner?.stop();
    runner = undefined;
  });

  it('answers 503 on /health while on_start runs, 200 after, and the handler sees what on_start loaded', async () => {
    const r = await start({ TERN_HANDLER: app.handler, TERN_ON_START: app.onStart, LOAD_SECONDS: '1.5' });
    await r.waitForHealth(503);
    const early = await r.post('{"x":1}');
    expect(early.status).toBe(503);
    await r.waitForHealth(200);
    const res = await r.post(JSON.stringify({ x: 1, text: 'héllo' }));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('application/json');
    expect(await res.json()).toMatchObject({ echo: { x: 1, text: 'héllo' }, loaded: 1 });
    await r.waitForOutput('stdout', /POST \/ 200 /);
  });

  it('answers 500 with the error and its type when the handler raises (trace to stderr), 400 for a body that is not JSON', async () => {
    const r = await start({ TERN_HANDLER: app.handler });
    await r.waitForHealth(200);
    const failed = await r.post(JSON.stringify({ fail: 'negative' }));
    expect(failed.status).toBe(500);
    expect(await failed.json()).toEqual({ error: 'bad input: negative', type: ERROR_TYPE[language] });
    await r.waitForOutput('stderr', 'bad input: negative');
    const bad = await r.post('{not json');
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: string }).error).toMatch(/not valid JSON/);
    // Still serving after both.
    expect((await r.post('{}')).status).toBe(200);
  });

  it('answers what the handler means: tern.HTTPError its status, message and headers, tern.Response its status, headers and body', async () => {
    const r = await start({ TERN_HANDLER: app.handler });
    await r.waitForHealth(200);
    const refused = await r.post(JSON.stringify({ status: 422, message: 'prompt is required' }));
    expect([refused.status, refused.headers.get('retry-after'), await refused.json()]).toEqual([422, '3', { error: 'prompt is required' }]);
    // No message: the status's own phrase. A status outside 400-599 is the handler's bug: 500.
    expect(await (await r.post(JSON.stringify({ status: 404 }))).json()).toEqual({ error: 'Not Found' });
    expect((await r.post(JSON.stringify({ status: 200 }))).status).toBe(500);
    const created = await r.post(JSON.stringify({ created: 'x7' }));
    expect([created.status, created.headers.get('location'), await created.json()]).toEqual([201, '/items/x7', { id: 'x7' }]);
    const text = await r.post(JSON.stringify({ csv: 'a,b\n1,2\n' }));
    expect([text.status, text.headers.get('content-type'), await text.text()]).toEqual([202, 'text/csv', 'a,b\n1,2\n']);
    // A ValueError stays a 500: only what the handler raises as an HTTPError is a 4xx.
    expect((await r.post(JSON.stringify({ fail: 'x' }))).status).toBe(500);
  });

  it("runs a map's chunk as one task: the handler once per input, errors in place or the first one failing the chunk", async () => {
    const r = await start({ TERN_HANDLER: app.handler, TERN_DEPLOYMENT_KIND: 'function' });
    await r.waitForHealth(200);
    const task = { 'x-tern-task-id': '00000000-0000-4000-8000-000000000001', 'x-tern-attempt': '1' };
    const chunk = (inputs: unknown[], returnExceptions: boolean) =>
      JSON.stringify({ __tern_map_chunk__: { inputs, return_exceptions: returnExceptions } });
    const kept = await r.post(chunk([{ x: 1 }, { fail: 'two' }, { x: 3 }], true), task);
    expect(kept.status).toBe(200);
    const outcomes = (await kept.json()) as { status: string; result?: { echo: unknown }; error?: string }[];
    expect(outcomes.map((o) => o.status)).toEqual(['ok', 'error', 'ok']);
    expect(outcomes[0].result?.echo).toEqual({ x: 1 });
    expect(outcomes[1].error).toBe(`${ERROR_TYPE[language]}: bad input: two`);
    const failed = await r.post(chunk([{ x: 1 }, { fail: 'two' }, { x: 3 }], false), task);
    expect(failed.status).toBe(500);
    const chunkError = (await failed.json()) as { error: string; types: string[] };
    expect(chunkError.error).toBe(`input 1 of the chunk: ${ERROR_TYPE[language]}: bad input: two`);
    // no_retry_on matches the input's own error through the chunk's.
    expect(chunkError.types).toEqual(expect.arrayContaining(['MapInputError', ERROR_TYPE[language]]));
    // A task's failure carries its traceback (an endpoint's answer does not: see the 500 above).
    const one = (await (await r.post(JSON.stringify({ fail: 'deep' }), task)).json()) as { traceback?: string };
    expect(one.traceback).toMatch(
      language === 'python'
        ? /Traceback \(most recent call last\)[\s\S]*ValueError: bad input: deep/
        : /RangeError: bad input: deep\n\s+at predict/,
    );
    // Without a task id (an endpoint's request) the marker is just input.
    expect(((await (await r.post(chunk([{ x: 1 }], true))).json()) as { echo: unknown }).echo).toMatchObject({ __tern_map_chunk__: {} });
  });

  it('runs two slow requests in parallel with 2 workers, on_start once per container (python) or per worker (node)', async () => {
    const r = await start({ TERN_HANDLER: app.handler, TERN_ON_START: app.onStart, TERN_WORKERS: '2', TERN_CONCURRENCY: '1' });
    await r.waitForHealth(200);
    // node:cluster: each worker loads on its own; give the second one its moment.
    if (language === 'node') await new Promise((res) => setTimeout(res, 500));
    const began = Date.now();
    const answers = (await Promise.all([r.postFresh('{"sleep":1}'), r.postFresh('{"sleep":1}')])).map((a) => a.json);
    expect(Date.now() - began).toBeLessThan(1900);
    const pids = new Set(answers.map((a) => a.pid));
    expect(pids.size).toBe(2);
    for (const a of answers) expect(a.loaded).toBe(1);
    if (language === 'python') {
      // Loaded once, in the parent, before the workers were forked.
      expect(new Set(answers.map((a) => a.loaded_in)).size).toBe(1);
      expect(pids.has(answers[0].loaded_in)).toBe(false);
    }
  });

  it('bounds one worker to TERN_CONCURRENCY requests at once', async () => {
    const r = await start({ TERN_HANDLER: app.handler, TERN_WORKERS: '1', TERN_CONCURRENCY: '2' });
    await r.waitForHealth(200);
    const began = Date.now();
    await Promise.all([1, 2, 3].map(() => r.postFresh('{"sleep":1}')));
    const took = Date.now() - began;
    // Two at once, the third after: about 2 s, neither 1 (unbounded) nor 3 (serial).
    expect(took).toBeGreaterThan(1900);
    expect(took).toBeLessThan(2800);
  });

  it('streams a generator as NDJSON chunks, or as server-sent events when asked', async () => {
    const r = await start({ TERN_HANDLER: app.stream });
    await r.waitForHealth(200);
    const ndjson = await r.post('{"n":3}');
    expect(ndjson.headers.get('content-type')).toContain('application/x-ndjson');
    const arrivals: number[] = [];
    let text = '';
    for await (const chunk of ndjson.body!) {
      arrivals.push(Date.now());
      text += Buffer.from(chunk).toString();
    }
    expect(
      text
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l)),
    ).toEqual([{ i: 0 }, { i: 1 }, { i: 2 }]);
    // Chunks arrive as the generator yields them, not all at the end.
    expect(arrivals.length).toBeGreaterThan(1);

    const sse = await r.post('{"n":2}', { accept: 'text/event-stream' });
    expect(sse.headers.get('content-type')).toContain('text/event-stream');
    expect(await sse.text()).toBe('data: {"i": 0}\n\ndata: {"i": 1}\n\n'.replace(/": /g, language === 'python' ? '": ' : '":'));
  });

  it("stops a stream whose client hangs up: the handler's generator is closed at once, the runner says so, the slot is free", async () => {
    const r = await start({ TERN_HANDLER: app.long, TERN_CONCURRENCY: '1' });
    await r.waitForHealth(200);
    const hungUpAt = await r.hangUpAfter('{"n":100}', 2);
    // Well before the stream's natural end (100 items 0.1 s apart: 10 s).
    await r.waitForOutput('stdout', 'long stream closed', 1500);
    await r.waitForOutput('stderr', /tern-runner: the client of POST \/ hung up after \d+ item\(s\); stopped the handler's stream/, 1500);
    expect(Date.now() - hungUpAt).toBeLessThan(1500);
    // One request at a time, and the next one is answered now, not when the 10 s would have passed.
    const began = Date.now();
    expect(await r.postFresh('{"n":1}')).toEqual({ status: 200, json: { i: 0 } });
    expect(Date.now() - began).toBeLessThan(1500);
  });

  it('answers HEAD as GET without a body', async () => {
    const r = await start({ TERN_HANDLER: app.handler });
    await r.waitForHealth(200);
    const health = await fetch(r.url('/health'), { method: 'HEAD' });
    expect(health.status).toBe(200);
    expect(health.headers.get('content-type')).toContain('application/json');
    expect(await health.text()).toBe('');
    const root = await fetch(r.url('/'), { method: 'HEAD' });
    expect(root.status).toBe(405);
    expect(await root.text()).toBe('');
    // The connection is still good for a request after them.
    expect((await r.post('{}')).status).toBe(200);
  });

  it('on SIGTERM stops accepting, finishes the request in flight and exits 0', async () => {
    const r = await start({ TERN_HANDLER: app.handler, TERN_WORKERS: language === 'python' ? '2' : '1' });
    await r.waitForHealth(200);
    const inFlight = r.post('{"sleep":1}');
    await new Promise((res) => setTimeout(res, 300));
    r.signal('SIGTERM');
    const res = await inFlight;
    expect(res.status).toBe(200);
    expect(((await res.json()) as { echo: unknown }).echo).toEqual({ sleep: 1 });
    expect(await r.exit()).toEqual([0, null]);
    expect(await r.health()).toBe(0);
  });
});
