import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { MapResultLine, MapStarted, MapView } from '#tern/contracts';
import { exampleSpec } from '../support/examples.js';
import { startStack, type Stack } from '../support/stack.js';
import { waitFor } from '../support/processes.js';

const fn = (name: string, replace: Record<string, string> = {}) => exampleSpec(stack, 'map-chunks', name, replace);

const ndjson = (inputs: unknown[]) => inputs.map((i) => JSON.stringify(i)).join('\n');

/** The map issue's "done when", as a newcomer does it after `npm run up`. */
let stack: Stack;

describe('maps end to end', () => {
  const auth = () => ({ authorization: `Bearer ${stack.token}` });
  const startMap = (name: string, body: string, query = '') =>
    fetch(`${stack.gateway}/function/${name}/map${query}`, {
      method: 'POST',
      headers: { ...auth(), 'content-type': 'application/json' },
      body,
    });
  const started = async (name: string, body: string, query = ''): Promise<MapStarted> => {
    const res = await startMap(name, body, query);
    expect(res.status).toBe(202);
    return (await res.json()) as MapStarted;
  };
  const mapView = async (id: string) => (await (await fetch(`${stack.gateway}/api/v1/maps/${id}`, { headers: auth() })).json()) as MapView;
  const results = async (id: string, from = 0): Promise<MapResultLine[]> => {
    const text = await (await fetch(`${stack.gateway}/api/v1/maps/${id}/results?from=${from}`, { headers: auth() })).text();
    return text
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as MapResultLine);
  };
  const actual = (name: string) => stack.actual(name);
  const message = async (res: Response) => String(((await res.json()) as { message: string | string[] }).message);
  const services = () => stack.services();

  beforeAll(async () => {
    stack = await startStack('maps');
  }, 120_000);

  afterAll(async () => {
    await stack?.stop();
  });

  it('maps 10,000 inputs in chunks of 100 with tern map: every result once, in input order, on containers that scale out and back to 0', async () => {
    expect((await stack.tern('deploy', fn('squares', { keep_warm_seconds: '3' }))).code).toBe(0);
    const dir = stack.scratch('map-io');
    writeFileSync(join(dir, 'inputs.jsonl'), ndjson(Array.from({ length: 10_000 }, (_, n) => ({ n, seconds: 0.002 }))));
    const peak = { containers: 0 };
    const watch = setInterval(() => {
      actual('squares').then(
        (n) => (peak.containers = Math.max(peak.containers, n)),
        () => undefined,
      );
    }, 500);
    const ran = await stack.tern(
      'map',
      'squares',
      '--input',
      join(dir, 'inputs.jsonl'),
      '--chunk-size',
      '100',
      '--out',
      join(dir, 'out.jsonl'),
    );
    clearInterval(watch);
    expect(ran.stderr).toMatch(/10000\/10000 100%/);
    expect(ran.stderr).toMatch(/complete: 10000 succeeded, 0 failed/);
    expect(ran.code).toBe(0);
    const lines = readFileSync(join(dir, 'out.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as MapResultLine);
    expect(lines).toHaveLength(10_000);
    lines.forEach((l, i) => expect(l).toEqual({ index: i, status: 'ok', result: { n: i, square: i * i } }));
    expect(peak.containers).toBeGreaterThan(1);
    await waitFor('squares back to zero', async () => (await actual('squares')) === 0, 90_000, 500);
  }, 400_000);

  it('keeps failed inputs in place with return_exceptions, and otherwise fails the map at its first error and cancels the rest', async () => {
    expect((await stack.tern('deploy', fn('picky', { keep_warm_seconds: '30', max_retries: '1', max_containers: '1' }))).code).toBe(0);
    const inputs = Array.from({ length: 30 }, (_, n) => ({ n: n % 10 === 7 ? 'x' : n }));
    const kept = await started('picky', JSON.stringify(inputs), '?chunk_size=4&return_exceptions=true');
    expect(kept.total).toBe(30);
    const keptLines = await results(kept.map_id);
    expect(keptLines.map((l) => l.index)).toEqual(inputs.map((_, i) => i));
    for (const [i, l] of keptLines.entries()) {
      if (i % 10 === 7) expect(l).toMatchObject({ status: 'error', error: expect.stringMatching(/ValueError: "n" must be a number/) });
      else expect(l).toEqual({ index: i, status: 'ok', result: { n: i, square: i * i } });
    }
    expect(await mapView(kept.map_id)).toMatchObject({ status: 'complete', counts: { succeeded: 27, failed: 3 } });

    // Without: input 7 fails its chunk (after its retry), the map fails, and slow chunks not yet started never run.
    const slow = Array.from({ length: 40 }, (_, n) => (n === 7 ? { n: 'x' } : { n, seconds: 0.5 }));
    const failing = await started('picky', ndjson(slow), '?chunk_size=2');
    await waitFor('map failed', async () => (await mapView(failing.map_id)).status === 'failed', 120_000, 250);
    const view = await mapView(failing.map_id);
    expect(view.error).toMatch(/^input 7: ValueError: "n" must be a number/);
    const failedLines = await results(failing.map_id);
    expect(failedLines).toHaveLength(40);
    expect(failedLines[7]).toMatchObject({ status: 'error' });
    expect(failedLines.filter((l) => l.status === 'cancelled').length).toBeGreaterThan(20);
    expect((await mapView(failing.map_id)).counts.cancelled).toBeGreaterThan(20);
  }, 300_000);

  it('runs quick chunks in bunches, each its own task: a chunk that times out fails alone, retried alone, and the chunks after it run', async () => {
    const spec = fn('bunched', { keep_warm_seconds: '60', max_retries: '1', timeout: '3', max_containers: '1', workers: '1' });
    expect((await stack.tern('deploy', spec)).code).toBe(0);
    // A container up first, its runner's log heard while the map runs (the runner logs each call).
    expect((await stack.tern('run', 'bunched', '-d', '{"n": 1}')).code).toBe(0);
    const logs = stack.tern('logs', 'bunched', '--wait', '60');
    await new Promise((r) => setTimeout(r, 2000));
    const quick = await started('bunched', ndjson(Array.from({ length: 600 }, (_, n) => ({ n }))), '?chunk_size=1');
    await waitFor('quick map complete', async () => (await mapView(quick.map_id)).status === 'complete', 120_000, 250);
    const quickLines = await results(quick.map_id);
    expect(quickLines).toHaveLength(600);
    quickLines.forEach((l, i) => expect(l).toEqual({ index: i, status: 'ok', result: { n: i, square: i * i } }));
    // Fewer calls of the runner than chunks: they went in bunches.
    const calls = (await logs).stdout.split('\n').filter((l) => / POST \/ 200 /.test(l)).length;
    expect(calls).toBeGreaterThan(0);
    expect(calls).toBeLessThan(300);

    // Input 150 outlives its timeout twice: its chunk fails (kept in place); its bunch's other chunks all run.
    const inputs = Array.from({ length: 300 }, (_, n) => (n === 150 ? { n, seconds: 30 } : { n }));
    const slow = await started('bunched', ndjson(inputs), '?chunk_size=1&return_exceptions=true');
    await waitFor('slow map complete', async () => (await mapView(slow.map_id)).status === 'complete', 120_000, 250);
    const slowLines = await results(slow.map_id);
    expect(slowLines).toHaveLength(300);
    for (const [i, l] of slowLines.entries()) {
      if (i === 150) expect(l).toMatchObject({ index: 150, status: 'error', error: expect.stringMatching(/timeout/) });
      else expect(l).toEqual({ index: i, status: 'ok', result: { n: i, square: i * i } });
    }
    expect(await mapView(slow.map_id)).toMatchObject({ counts: { succeeded: 299, failed: 1 } });
  }, 300_000);

  it('finishes a map once when the gateway, the scheduler and the agent are killed mid-run, and a reader that reconnects gets every line once', async () => {
    expect((await stack.tern('deploy', fn('sturdy', { keep_warm_seconds: '30' }))).code).toBe(0);
    const map = await started('sturdy', ndjson(Array.from({ length: 2000 }, (_, n) => ({ n, seconds: 0.02 }))), '?chunk_size=20');
    const first = await fetch(`${stack.gateway}/api/v1/maps/${map.map_id}/results`, { headers: auth() });
    const reader = (first.body as ReadableStream<Uint8Array>).getReader();
    let text = '';
    while (text.split('\n').length < 50) text += Buffer.from((await reader.read()).value!).toString('utf8');
    await reader.cancel();
    const kept = text.split('\n').slice(0, -1); // whole lines only: the client resumes from there
    for (const s of ['agent', 'gateway', 'scheduler']) process.kill(services()[s].pid, 'SIGKILL');
    await waitFor(
      'gateway back',
      async () => (await fetch(`${stack.gateway}/health/live`).catch(() => undefined))?.ok === true,
      60_000,
      500,
    );
    const rest = await results(map.map_id, kept.length);
    const all = [...kept.map((l) => JSON.parse(l) as MapResultLine), ...rest];
    expect(all).toHaveLength(2000);
    all.forEach((l, i) => expect(l).toEqual({ index: i, status: 'ok', result: { n: i, square: i * i } }));
    expect(await mapView(map.map_id)).toMatchObject({ status: 'complete', counts: { succeeded: 2000, failed: 0, cancelled: 0 } });
  }, 400_000);

  it('streams in completion order, cancels, and answers bad input with a 4xx that says what to fix', async () => {
    expect((await stack.tern('deploy', fn('misc', { keep_warm_seconds: '30' }))).code).toBe(0);
    const quick = await started('misc', JSON.stringify([{ n: 1 }, { n: 2 }, { n: 3 }]), '?order=completion');
    expect((await results(quick.map_id)).map((l) => l.index).sort()).toEqual([0, 1, 2]);

    const long = await started('misc', ndjson(Array.from({ length: 50 }, (_, n) => ({ n, seconds: 5 }))));
    const cancelled = await fetch(`${stack.gateway}/api/v1/maps/${long.map_id}`, { method: 'DELETE', headers: auth() });
    expect(cancelled.status).toBe(200);
    expect(await cancelled.json()).toMatchObject({ status: 'cancelled' });
    expect((await fetch(`${stack.gateway}/api/v1/maps/${long.map_id}`, { method: 'DELETE', headers: auth() })).status).toBe(409);
    expect((await results(long.map_id)).filter((l) => l.status === 'cancelled').length).toBeGreaterThan(40);

    const notJson = await startMap('misc', '[{"n": 1}, nope');
    expect(notJson.status).toBe(400);
    expect(await message(notJson)).toMatch(/not a .*JSON array/);
    const badLine = await startMap('misc', '{"n": 1}\n{oops');
    expect(badLine.status).toBe(400);
    expect(await message(badLine)).toMatch(/line 2 of the NDJSON body is not JSON/);
    const empty = await startMap('misc', '[]');
    expect(empty.status).toBe(400);
    expect(await message(empty)).toMatch(/the map has no inputs/);
    const nullInput = await startMap('misc', '[1, null]');
    expect(nullInput.status).toBe(400);
    expect(await message(nullInput)).toMatch(/input 1 is null/);
    const tooMany = await startMap('misc', '{}\n'.repeat(1_000_001));
    expect(tooMany.status).toBe(413);
    expect(await message(tooMany)).toMatch(/at most 1000000 inputs/);
    const badChunk = await startMap('misc', '[{}]', '?chunk_size=0');
    expect(badChunk.status).toBe(400);
    expect(await message(badChunk)).toMatch(/chunk_size must be at least 1/);
    const unknown = await startMap('nope', '[{}]');
    expect(unknown.status).toBe(404);
    expect(await message(unknown)).toMatch(/function "nope" not found/);
    const malformed = await fetch(`${stack.gateway}/api/v1/maps/not-a-map`, { headers: auth() });
    expect(malformed.status).toBe(400);
    expect(await message(malformed)).toMatch(/not a map id/);
    const beyond = await fetch(`${stack.gateway}/api/v1/maps/${quick.map_id}/results?from=4`, { headers: auth() });
    expect(beyond.status).toBe(400);
  }, 300_000);
});
