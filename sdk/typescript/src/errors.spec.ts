import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveConnection } from './config.js';
import {
  apiError,
  TernApiError,
  TernAuthError,
  TernConflictError,
  TernInvalidRequestError,
  TernNotFoundError,
  TernUnavailableError,
} from './errors.js';
import { failure, ndjsonLines } from './http.js';

describe('errors by kind', () => {
  it.each([
    [400, TernInvalidRequestError],
    [413, TernInvalidRequestError],
    [401, TernAuthError],
    [403, TernAuthError],
    [404, TernNotFoundError],
    [409, TernConflictError],
    [429, TernUnavailableError],
    [503, TernUnavailableError],
  ])('%i is a %p', (status, kind) => {
    const error = apiError(status, `${status} what to fix`);
    expect(error).toBeInstanceOf(kind);
    expect(error).toBeInstanceOf(TernApiError);
    expect(error.name).toBe(kind.name);
  });

  it("carries the gateway's message from JSON, a list of messages, or plain text", () => {
    const json = (body: unknown, status: number) => new Response(JSON.stringify(body), { status });
    expect(failure(json({ message: 'cpu must be at least 0.05' }, 400), '{"message":"cpu must be at least 0.05"}').message).toBe(
      '400 cpu must be at least 0.05',
    );
    expect(failure(json({}, 400), '{"message":["a","b"]}').message).toBe('400 a; b');
    expect(failure(new Response('', { status: 502, statusText: 'Bad Gateway' }), 'upstream closed').message).toBe('502 upstream closed');
    expect(failure(new Response('', { status: 500, statusText: 'Internal Server Error' }), '').message).toBe('500 Internal Server Error');
    expect(failure(new Response('', { status: 500 }), '').constructor).toBe(TernApiError);
  });
});

describe('ndjsonLines', () => {
  it('yields each line once, however the bytes are split', async () => {
    const text = '{"index":0}\n{"index":1,"s":"é"}\n\n{"index":2}';
    const bytes = new TextEncoder().encode(text);
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < bytes.length; i += 5) controller.enqueue(bytes.slice(i, i + 5));
        controller.close();
      },
    });
    const lines: unknown[] = [];
    for await (const line of ndjsonLines(new Response(body))) lines.push(line);
    expect(lines).toEqual([{ index: 0 }, { index: 1, s: 'é' }, { index: 2 }]);
  });
});

describe('resolveConnection', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tern-sdk-config-'));
  const path = join(dir, 'config.json');
  writeFileSync(path, JSON.stringify({ current: 'local', contexts: { local: { gateway: 'http://127.0.0.1:4000/', token: 't1' } } }));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('reads the current context of the CLI config, under TERN_GATEWAY / TERN_TOKEN', () => {
    expect(resolveConnection({ TERN_CONFIG: path })).toEqual({ gateway: 'http://127.0.0.1:4000', token: 't1', source: `${path} (local)` });
    expect(resolveConnection({ TERN_CONFIG: path, TERN_GATEWAY: 'http://g:1', TERN_TOKEN: 't2' })).toMatchObject({
      gateway: 'http://g:1',
      token: 't2',
      source: 'TERN_GATEWAY',
    });
    expect(() => resolveConnection({ TERN_CONFIG: path }, 'prod')).toThrow(`no context "prod" in ${path}`);
  });
});
