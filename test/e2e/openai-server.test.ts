import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { startStack, type Stack } from '../support/stack.js';
import { waitFor } from '../support/processes.js';

const EXAMPLE = fileURLToPath(new URL('../../examples/openai-server', import.meta.url));
const NAME = 'openai-server';

let stack: Stack;
let spec: string;

/** The example copied aside, its spec's lines changed as `replace` says (config only: the server is the example's). */
function deployExample(replace: [RegExp, string][]) {
  let text = readFileSync(join(EXAMPLE, 'tern.yaml'), 'utf8');
  for (const [from, to] of replace) {
    if (!from.test(text)) throw new Error(`the example's tern.yaml has no ${from}`);
    text = text.replace(from, to);
  }
  writeFileSync(spec, text);
  return stack.tern('deploy', spec);
}

function client(base = `/endpoint/${NAME}/v1`, defaultHeaders?: Record<string, string>) {
  // No retries: a request that fails is seen failing, never answered by a second try.
  return new OpenAI({ apiKey: stack.token, baseURL: `${stack.gateway}${base}`, maxRetries: 0, defaultHeaders });
}

type Stats = { active: number; served: number; disconnected: number };
async function serverStats(): Promise<Stats> {
  const res = await fetch(`${stack.gateway}/endpoint/${NAME}/stats`, { headers: { authorization: `Bearer ${stack.token}` } });
  expect(res.status).toBe(200);
  return (await res.json()) as Stats;
}

/** The deployment's live log lines (`tern logs -f` as an API stream), collected until stop(). */
function followLogs() {
  const lines: { line: string; at: string }[] = [];
  const abort = new AbortController();
  const done = (async () => {
    const res = await fetch(`${stack.gateway}/api/v1/deployments/${NAME}/logs?follow=true`, {
      headers: { authorization: `Bearer ${stack.token}` },
      signal: abort.signal,
    });
    let buffer = '';
    for await (const chunk of res.body!) {
      buffer += Buffer.from(chunk).toString();
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        if (block.startsWith('event: line\n')) lines.push(JSON.parse(block.split('\ndata: ')[1]) as { line: string; at: string });
      }
    }
  })().catch(() => undefined);
  return {
    lines,
    async stop() {
      abort.abort();
      await done;
    },
  };
}

const words = (n: number, prompt: string) => Array.from({ length: n }, (_, i) => prompt.split(' ')[i % prompt.split(' ').length]).join(' ');

/**
 * What people deploy to serve a model (vLLM, TGI, llama.cpp's server: an OpenAI-compatible server
 * in a container), driven by the official `openai` client through the gateway, with
 * `baseURL …/endpoint/<name>/v1`.
 */
describe('examples/openai-server with the openai client', () => {
  beforeAll(async () => {
    stack = await startStack('openai');
    spec = join(stack.scratch('openai-server'), 'tern.yaml');
    cpSync(EXAMPLE, join(spec, '..'), { recursive: true });
    // One container, so the abort below frees a slot the eight streams then need; a short idle limit.
    const deployed = await deployExample([
      [/MODEL_NAME: .*/, 'MODEL_NAME: echo-one'],
      [/idle_timeout: \d+/, 'idle_timeout: 5'],
      [/max_containers: \d+/, 'max_containers: 1'],
    ]);
    expect(deployed.stderr).toBe('');
    expect(deployed.stdout).toContain(`Deployed ${NAME} version 1`);
  }, 180_000);

  afterAll(async () => {
    await stack?.stop();
  });

  it('lists its model, completes, and streams', async () => {
    const openai = client();
    // Cold: the first call waits for the container to start and pass GET /v1/models.
    const models = await openai.models.list();
    expect(models.data.map((m) => m.id)).toEqual(['echo-one']);

    const completion = await openai.chat.completions.create({
      model: 'echo-one',
      messages: [{ role: 'user', content: 'tern serves models' }],
      max_tokens: 5,
    });
    expect(completion.choices[0].message.content).toBe(words(5, 'tern serves models'));

    const legacy = await openai.completions.create({ model: 'echo-one', prompt: 'one two', max_tokens: 3 });
    expect(legacy.choices[0].text).toBe('one two one');

    const stream = await openai.chat.completions.create({
      model: 'echo-one',
      messages: [{ role: 'user', content: 'streams arrive as produced' }],
      max_tokens: 12,
      stream: true,
    });
    const pieces: string[] = [];
    for await (const chunk of stream) pieces.push(chunk.choices[0].delta.content ?? '');
    expect(pieces).toHaveLength(12);
    expect(pieces.join('')).toBe(words(12, 'streams arrive as produced'));

    const missing = await openai.chat.completions
      .create({ model: 'gpt-9', messages: [{ role: 'user', content: 'x' }] })
      .catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
    expect((missing as Error).message).toMatch(/model 'gpt-9' not found/);
  }, 180_000);

  it("passes a client's abort to the container within a second, which frees its slot", async () => {
    const logs = followLogs();
    try {
      await waitFor('the log stream to attach', async () => (await serverStats()).active === 0, 10_000, 200);
      const stream = await client().completions.create(
        // 200 tokens at 0.1 s: 20 s if nobody stopped it.
        { model: 'echo-one', prompt: 'cancel me', max_tokens: 200, stream: true, delay: 0.1 } as OpenAI.CompletionCreateParamsStreaming,
      );
      let received = 0;
      for await (const _ of stream) if (++received === 3) break; // break aborts the request, as stream.controller.abort() does
      const abortedAt = Date.now();
      expect(stream.controller.signal.aborted).toBe(true);

      await waitFor(
        'the disconnect in the container log',
        async () => logs.lines.some((l) => /client disconnected/.test(l.line)),
        10_000,
        100,
      );
      const line = logs.lines.find((l) => /client disconnected/.test(l.line))!.line;
      // The server stamps its lines with its own clock (the machine's): when it noticed.
      const seenAt = Number(line.split(' ')[0]) * 1000;
      expect({ line, afterMs: seenAt - abortedAt }).toMatchObject({ afterMs: expect.any(Number) });
      expect(seenAt - abortedAt).toBeLessThan(1000);
      expect(Number(/after (\d+) tokens/.exec(line)![1])).toBeLessThan(20);
      const stats = await serverStats();
      expect(stats).toMatchObject({ active: 0, disconnected: 1 });
    } finally {
      await logs.stop();
    }
  }, 60_000);

  it('serves eight concurrent streams at once on the one container', async () => {
    const openai = client();
    // 20 tokens at 0.25 s each: 5 s a stream, 40 s if they were served one after another.
    const runs = await Promise.all(
      Array.from({ length: 8 }, async (_, i) => {
        const stream = await openai.completions.create({
          model: 'echo-one',
          prompt: `stream ${i}`,
          max_tokens: 20,
          stream: true,
          delay: 0.25,
        } as OpenAI.CompletionCreateParamsStreaming);
        let text = '';
        let first = 0;
        for await (const chunk of stream) {
          first ||= Date.now();
          text += chunk.choices[0].text;
        }
        return { text, first, last: Date.now() };
      }),
    );
    runs.forEach((r, i) => expect(r.text).toBe(words(20, `stream ${i}`)));
    // Every stream had begun before any ended: eight slots, the aborted one's among them, were free.
    expect(Math.max(...runs.map((r) => r.first))).toBeLessThan(Math.min(...runs.map((r) => r.last)));
    expect((await serverStats()).active).toBe(0);
  }, 120_000);

  it('keeps a 60 s stream that never pauses 5 s (the idle limit) and ends a stalled one with an error event', async () => {
    const openai = client();
    const started = Date.now();
    const long = await openai.completions.create({
      model: 'echo-one',
      prompt: 'tick',
      max_tokens: 60,
      stream: true,
      delay: 1,
    } as OpenAI.CompletionCreateParamsStreaming);
    let count = 0;
    for await (const chunk of long) if (chunk.choices[0].text) count++;
    expect(count).toBe(60);
    expect(Date.now() - started).toBeGreaterThan(59_000);

    const stalled = await openai.completions.create({
      model: 'echo-one',
      prompt: 'stall',
      max_tokens: 10,
      stream: true,
      stall_after: 3,
      stall: 12,
    } as OpenAI.CompletionCreateParamsStreaming);
    const got: string[] = [];
    const error = await (async () => {
      for await (const chunk of stalled) got.push(chunk.choices[0].text);
    })().catch((e: unknown) => e);
    expect(got).toHaveLength(3);
    // The gateway's `event: error` with an OpenAI error object: the client raises it with its message.
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expect((error as Error).message).toMatch(/sent nothing for 5 s \(the deployment's idle_timeout\)/);
  }, 150_000);

  it('reaches the new version at the same baseURL after a second deploy; the old one by @1 or x-tern-version', async () => {
    const deployed = await deployExample([[/MODEL_NAME: .*/, 'MODEL_NAME: echo-two']]);
    expect(deployed.stdout).toContain(`Deployed ${NAME} version 2`);

    const latest = await client().models.list().withResponse();
    expect(latest.data.data.map((m) => m.id)).toEqual(['echo-two']);
    expect(latest.response.headers.get('x-tern-version')).toBe('2');

    const pinned = await client(`/endpoint/${NAME}@1/v1`).models.list().withResponse();
    expect(pinned.data.data.map((m) => m.id)).toEqual(['echo-one']);
    expect(pinned.response.headers.get('x-tern-version')).toBe('1');
    const byHeader = await client(`/endpoint/${NAME}/v1`, { 'x-tern-version': '1' }).models.list();
    expect(byHeader.data.map((m) => m.id)).toEqual(['echo-one']);

    const reply = await client().chat.completions.create({
      model: 'echo-two',
      messages: [{ role: 'user', content: 'new code' }],
      max_tokens: 2,
    });
    expect(reply.choices[0].message.content).toBe('new code');
  }, 180_000);
});
