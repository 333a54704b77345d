import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { callHandler, failedForGood } from './call-handler.js';

/** A stand-in runner answering every task with `status` and `body`, as Tern's runners do. */
async function runnerAnswering(status: number, body: unknown): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as AddressInfo).port };
}

async function outcomeOf(status: number, body: unknown) {
  const { server, port } = await runnerAnswering(status, body);
  try {
    return await callHandler({ host: '127.0.0.1', port }, 't-1', 1, {}, new AbortController().signal);
  } finally {
    server.close();
  }
}

describe('callHandler: a failed task', () => {
  it("keeps the handler's traceback in the error, after its type and message, and the types it derives from", async () => {
    const outcome = await outcomeOf(500, {
      error: 'bad input',
      type: 'JSONDecodeError',
      types: ['JSONDecodeError', 'json.decoder.JSONDecodeError', 'ValueError', 'Exception'],
      traceback: 'Traceback (most recent call last):\n  File "app.py", line 3\njson.decoder.JSONDecodeError: bad input',
    });
    expect(outcome).toEqual({
      kind: 'error',
      status: 500,
      message:
        'JSONDecodeError: bad input\n\nRemote traceback:\nTraceback (most recent call last):\n  File "app.py", line 3\njson.decoder.JSONDecodeError: bad input',
      types: ['JSONDecodeError', 'json.decoder.JSONDecodeError', 'ValueError', 'Exception'],
    });
    // no_retry_on names a class the error derives from: not retried; another: retried.
    expect(failedForGood(outcome, ['ValueError'])).toBe(true);
    expect(failedForGood(outcome, ['KeyError'])).toBe(false);
    expect(failedForGood(outcome)).toBe(false);
  });

  it('never retries a 4xx the handler answered on purpose (tern.HTTPError), whatever the policy', async () => {
    const outcome = await outcomeOf(422, { error: 'prompt is required' });
    expect(outcome).toEqual({ kind: 'error', status: 422, message: '422 prompt is required' });
    expect(failedForGood(outcome)).toBe(true);
    expect(failedForGood(await outcomeOf(503, { error: 'the handler is still starting' }))).toBe(false);
  });
});
