import { createServer, type Server } from 'node:http';
import type { Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import type { InvokeHead } from '#tern/contracts';
import { InvokeError } from '#tern/messaging';
import { containerForwarder, forwardToContainer } from './forward.js';

const head = (over: Partial<InvokeHead> = {}): InvokeHead => ({
  requestId: 'r-1',
  deploymentId: 'd-1',
  method: 'POST',
  path: '/?x=1',
  headers: { 'content-type': 'application/json' },
  timeoutMs: 5000,
  bodyBytes: 0,
  ...over,
});

async function text(body: AsyncIterable<Uint8Array> | Uint8Array): Promise<string> {
  if (body instanceof Uint8Array) return Buffer.from(body).toString();
  let s = '';
  for await (const c of body) s += Buffer.from(c).toString();
  return s;
}

describe('forwarding an invoke to a container', () => {
  let server: Server;
  let port: number;
  /** When the container saw its client of /long go away before the response ended. */
  let longClosedAt: number | undefined;

  beforeAll(async () => {
    server = createServer((req, res) => {
      if (req.url === '/slow') return void setTimeout(() => res.end('late'), 2000);
      if (req.url === '/long') {
        // A chunk every 100 ms for 5 s, as a model server streams tokens.
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const tick = setInterval(() => res.write('data: token\n\n'), 100);
        const end = setTimeout(() => res.end(), 5000);
        res.on('close', () => {
          clearInterval(tick);
          clearTimeout(end);
          if (!res.writableFinished) longClosedAt = Date.now();
        });
        return;
      }
      if (req.url === '/stream') {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('data: 1\n\n');
        setTimeout(() => res.end('data: 2\n\n'), 150);
        return;
      }
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        res.writeHead(201, { 'content-type': 'application/json', 'x-seen-path': req.url ?? '' });
        res.end(JSON.stringify({ got: JSON.parse(body), ct: req.headers['content-type'] }));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise((r) => server.close(r)));

  it('passes method, path, headers and body, and gives back status, headers (hop-by-hop removed) and body', async () => {
    const body = new TextEncoder().encode('{"a":1}');
    const res = await forwardToContainer({ host: '127.0.0.1', port }, head({ bodyBytes: body.length }), body, new AbortController().signal);
    expect(res.status).toBe(201);
    expect(res.headers['x-seen-path']).toBe('/?x=1');
    expect(res.headers.connection).toBeUndefined();
    expect(JSON.parse(await text(res.body))).toEqual({ got: { a: 1 }, ct: 'application/json' });
  });

  it('streams the body as the container writes it', async () => {
    const res = await forwardToContainer(
      { host: '127.0.0.1', port },
      head({ method: 'GET', path: '/stream' }),
      new Uint8Array(),
      new AbortController().signal,
    );
    const pieces: string[] = [];
    for await (const c of res.body as AsyncIterable<Uint8Array>) pieces.push(Buffer.from(c).toString());
    expect(pieces).toEqual(['data: 1\n\n', 'data: 2\n\n']);
  });

  it('answers 504 when the timeout passes and 502 when nothing listens', async () => {
    const abort = new AbortController();
    setTimeout(() => abort.abort(), 100);
    await expect(
      forwardToContainer({ host: '127.0.0.1', port }, head({ path: '/slow', timeoutMs: 100 }), new Uint8Array(), abort.signal),
    ).rejects.toMatchObject({
      code: 504,
      message: 'the container did not answer within 100 ms',
    });
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const dead = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    await expect(
      forwardToContainer({ host: '127.0.0.1', port: dead }, head(), new Uint8Array(), new AbortController().signal),
    ).rejects.toMatchObject({
      code: 502,
      message: expect.stringContaining('refused the connection'),
    });
  });

  it("closes the container's connection when the caller cancels mid-stream, failing the body with the cancel's reason", async () => {
    const abort = new AbortController();
    const res = await forwardToContainer(
      { host: '127.0.0.1', port },
      head({ method: 'GET', path: '/long' }),
      new Uint8Array(),
      abort.signal,
    );
    const pieces: string[] = [];
    const reading = (async () => {
      for await (const c of res.body as AsyncIterable<Uint8Array>) pieces.push(Buffer.from(c).toString());
    })();
    while (pieces.length < 3) await new Promise((r) => setTimeout(r, 20));
    const cancelledAt = Date.now();
    abort.abort(new InvokeError(499, 'the caller cancelled the request'));
    await expect(reading).rejects.toMatchObject({ code: 499, message: 'the caller cancelled the request' });
    while (longClosedAt === undefined && Date.now() - cancelledAt < 3000) await new Promise((r) => setTimeout(r, 10));
    // Seen by the container at once, not at the end of its 5 s stream.
    expect(longClosedAt! - cancelledAt).toBeLessThan(500);
  });
});

describe("a container's own connections", () => {
  /**
   * As Tern's runners serve: each accepted connection holds one of the container's request slots
   * (here one) until it closes, so a second connection is read only once the first is gone.
   */
  let server: Server;
  let port: number;
  beforeAll(async () => {
    let holder: Socket | undefined;
    const freed: (() => void)[] = [];
    /** Resolves once `socket` holds the slot: at once if free or its own, else when the holder's connection closes. */
    const slotFor = async (socket: Socket): Promise<void> => {
      while (holder && holder !== socket) await new Promise<void>((r) => freed.push(r));
      if (holder === socket) return;
      holder = socket;
      socket.once('close', () => {
        holder = undefined;
        for (const wake of freed.splice(0)) wake();
      });
    };
    server = createServer((req, res) => {
      slotFor(req.socket).then(
        () => setTimeout(() => res.end(req.url), req.url === '/slow' ? 500 : 10),
        () => res.destroy(),
      );
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise((r) => server.close(r)));

  it('are no more than the requests it takes at once: a second request waits for the kept-alive one, not for its idle timeout', async () => {
    const forwarder = containerForwarder({ host: '127.0.0.1', port }, 1);
    try {
      const started = Date.now();
      const call = (path: string) =>
        forwarder.handler(head({ method: 'GET', path }), new Uint8Array(), new AbortController().signal).then((r) => r.status);
      // Two at once (as after a client's hang-up, when the gateway's slot frees before the
      // container's): the second rides the first's connection once it is free.
      const slow = call('/slow');
      await new Promise((r) => setTimeout(r, 100));
      expect(await Promise.all([slow, call('/next')])).toEqual([200, 200]);
      expect(Date.now() - started).toBeLessThan(2000);
    } finally {
      await forwarder.close();
    }
  });
});
