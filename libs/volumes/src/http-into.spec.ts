import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { getInto } from './http-get.js';
import { type BodyFlow, type BodyPieces, type BodySink, getStreamed, getStreaming, type StreamedBody } from './http-into.js';

/** A server on loopback answering each GET with `answer`; counts connections, says when one closes. */
async function startServer(answer: (req: IncomingMessage, res: ServerResponse) => void) {
  const connections: Socket[] = [];
  const closed: Socket[] = [];
  const server = createServer(answer);
  server.on('connection', (socket: Socket) => {
    connections.push(socket);
    socket.on('close', () => closed.push(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const stop = () => {
    server.closeAllConnections();
    return new Promise((resolve) => server.close(resolve));
  };
  return { server, url, connections, closed, stop };
}

async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setImmediate(resolve));
}

describe('getInto over plain HTTP (the socket reads into the buffer)', () => {
  const blob = randomBytes(3 * 2 ** 20 + 17);
  let s: Awaited<ReturnType<typeof startServer>>;
  const seen: (string | undefined)[] = [];
  beforeAll(async () => {
    s = await startServer((req, res) => {
      seen.push(req.headers.authorization);
      if (req.url === '/blob') return void res.writeHead(200, { 'content-length': String(blob.length) }).end(blob);
      if (req.url === '/moved') return void res.writeHead(307, { location: '/blob' }).end();
      if (req.url === '/short') {
        res.writeHead(200, { 'content-length': '1000' });
        return void res.write(blob.subarray(0, 500), () => res.destroy());
      }
      if (req.url === '/empty') return void res.writeHead(200, { 'content-length': '0' }).end();
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"errors":[{"code":"BLOB_UNKNOWN"}]}');
    });
  });
  afterAll(() => s.stop());

  it('reads the body into the start of the buffer given, and into a new one without', async () => {
    const into = Buffer.alloc(4 * 2 ** 20);
    const got = await getInto(`${s.url}/blob`, { authorization: 'Bearer t' }, 4 * 2 ** 20, 10_000, into);
    if (!('bytes' in got)) throw new Error(`answered ${got.status}`);
    expect(got.bytes.equals(blob)).toBe(true);
    expect(got.bytes.buffer).toBe(into.buffer);
    expect(got.bytes.byteOffset).toBe(into.byteOffset);
    const fresh = await getInto(`${s.url}/blob`, {}, 4 * 2 ** 20, 10_000);
    expect('bytes' in fresh && fresh.bytes.equals(blob)).toBe(true);
    expect(seen.slice(-2)).toEqual(['Bearer t', undefined]);
    const empty = await getInto(`${s.url}/empty`, {}, 10, 10_000);
    expect('bytes' in empty && empty.bytes.length).toBe(0);
  });

  it('keeps connections alive across GETs', async () => {
    const before = s.connections.length;
    for (let i = 0; i < 5; i++) expect('bytes' in (await getInto(`${s.url}/blob`, {}, 2 ** 22, 10_000))).toBe(true);
    expect(s.connections.length - before).toBeLessThanOrEqual(1);
  });

  it('answers another status with the start of its text', async () => {
    expect(await getInto(`${s.url}/nothing`, {}, 2 ** 22, 10_000)).toEqual({
      status: 404,
      text: '{"errors":[{"code":"BLOB_UNKNOWN"}]}',
    });
  });

  it('refuses a body larger than asked or than the buffer, and one cut short', async () => {
    await expect(getInto(`${s.url}/blob`, {}, 2 ** 20, 10_000)).rejects.toThrow(`a blob of ${blob.length} bytes (at most 1048576 taken)`);
    await expect(getInto(`${s.url}/blob`, {}, 2 ** 22, 10_000, Buffer.alloc(2 ** 21))).rejects.toThrow('at most 2097152 taken');
    await expect(getInto(`${s.url}/short`, {}, 2 ** 22, 10_000)).rejects.toThrow(/cut off after 500 of 1000 bytes/);
  });

  it('follows a redirect without the authorization', async () => {
    const got = await getInto(`${s.url}/moved`, { authorization: 'Bearer t' }, 2 ** 22, 10_000);
    expect('bytes' in got && got.bytes.equals(blob)).toBe(true);
    expect(seen.slice(-2)).toEqual(['Bearer t', undefined]);
  });

  it('opens another connection when the server closed the kept one', async () => {
    expect('bytes' in (await getInto(`${s.url}/blob`, {}, 2 ** 22, 10_000))).toBe(true);
    const open = s.connections.filter((c) => !s.closed.includes(c));
    for (const c of open) c.destroy();
    await until(() => open.every((c) => s.closed.includes(c)));
    const got = await getInto(`${s.url}/blob`, {}, 2 ** 22, 10_000);
    expect('bytes' in got && got.bytes.equals(blob)).toBe(true);
  });

  it('streams a body into a few lent buffers, pausing while none is free, and keeps the connection', async () => {
    const before = s.connections.length;
    for (let run = 0; run < 2; run++) {
      const free: Buffer[] = [Buffer.alloc(100_000), Buffer.alloc(100_000)];
      const got: Buffer[] = [];
      const answered: { body?: StreamedBody } = {};
      let paused = 0;
      const pieces: BodyPieces = {
        take: () => free.pop() ?? (paused++, undefined),
        put: (buffer, n) => {
          got.push(Buffer.from(buffer.subarray(0, n)));
          // Lent back a little later, as a pipe's write completes.
          setTimeout(() => {
            free.push(buffer);
            answered.body?.more();
          }, 1);
        },
      };
      const answer = await getStreamed(new URL(`${s.url}/blob`), { authorization: 'Bearer t' }, 10_000, pieces);
      if (!('body' in answer)) throw new Error('no body');
      const body = (answered.body = answer.body);
      expect(body.length).toBe(blob.length);
      await body.ended;
      expect(Buffer.concat(got).equals(blob)).toBe(true);
      expect(got.slice(0, -1).every((piece) => piece.length === 100_000)).toBe(true);
      expect(paused).toBeGreaterThan(0);
    }
    expect(s.connections.length - before).toBeLessThanOrEqual(1);
  });

  it('answers a streamed GET that is not a 200 as getInto does, and rejects a body cut short', async () => {
    const pieces: BodyPieces = { take: () => Buffer.alloc(4096), put: () => undefined };
    expect(await getStreamed(new URL(`${s.url}/nothing`), {}, 10_000, pieces)).toEqual({
      status: 404,
      text: '{"errors":[{"code":"BLOB_UNKNOWN"}]}',
    });
    expect(await getStreamed(new URL(`${s.url}/moved`), {}, 10_000, pieces)).toEqual({ location: `${s.url}/blob` });
    const short = await getStreamed(new URL(`${s.url}/short`), {}, 10_000, pieces);
    if (!('body' in short)) throw new Error('no body');
    await expect(short.body.ended).rejects.toThrow(/cut off after 500 of 1000 bytes/);
    const empty = await getStreamed(new URL(`${s.url}/empty`), {}, 10_000, pieces);
    if (!('body' in empty)) throw new Error('no body');
    await expect(empty.body.ended).resolves.toBeUndefined();
  });

  it('names the error when nothing listens', async () => {
    const gone = await startServer(() => undefined);
    await gone.stop();
    await expect(getInto(`${gone.url}/blob`, {}, 10, 10_000)).rejects.toThrow('ECONNREFUSED');
  });
});

/**
 * A sink of `count` buffers of `size` bytes that copies out what each took once it is full; each
 * full buffer comes free again after `lagMs` (as a slab comes free once written and hashed), so
 * the socket runs out of room and waits.
 */
function slowSink(size: number, count: number, lagMs: number) {
  const free: Buffer[] = Array.from({ length: count }, () => Buffer.alloc(size));
  const got: Buffer[] = [];
  let current: { buffer: Buffer; filled: number } | undefined;
  let flow: BodyFlow | undefined;
  let waited = 0;
  let length: number | undefined;
  let taken = 0;
  const done = (c: { buffer: Buffer; filled: number }) => {
    got.push(Buffer.from(c.buffer.subarray(0, c.filled)));
    setTimeout(() => {
      free.push(c.buffer);
      flow!.more();
    }, lagMs).unref();
  };
  const sink: BodySink = {
    begin: (n, f) => {
      length = n;
      flow = f;
    },
    space: () => {
      if (current && current.filled < current.buffer.length) return current.buffer.subarray(current.filled);
      const buffer = free.pop();
      if (!buffer) {
        waited++;
        return undefined;
      }
      current = { buffer, filled: 0 };
      return buffer;
    },
    took: (n) => {
      current!.filled += n;
      taken += n;
      if (current!.filled === current!.buffer.length || taken === length) {
        done(current!);
        current = undefined;
      }
    },
  };
  return { sink, bytes: () => Buffer.concat(got), waited: () => waited, flow: () => flow! };
}

describe('getStreaming (the socket reads a body into the buffers a sink gives)', () => {
  const blob = randomBytes(5 * 2 ** 20 + 3);
  let s: Awaited<ReturnType<typeof startServer>>;
  beforeAll(async () => {
    s = await startServer((req, res) => {
      if (req.url === '/blob') return void res.writeHead(200, { 'content-length': String(blob.length) }).end(blob);
      if (req.url === '/short') {
        res.writeHead(200, { 'content-length': String(blob.length) });
        return void res.write(blob.subarray(0, 2 ** 20), () => res.destroy());
      }
      if (req.url === '/moved') return void res.writeHead(307, { location: '/blob' }).end();
      res.writeHead(404).end('{"errors":[{"code":"BLOB_UNKNOWN"}]}');
    });
  });
  afterAll(() => s.stop());

  it('gives the body whole and in order though the sink runs out of room, then reuses the connection', async () => {
    const slow = slowSink(100_003, 2, 5);
    expect(await getStreaming(new URL(`${s.url}/blob`), {}, 10_000, slow.sink)).toEqual({ length: blob.length });
    expect(slow.bytes().equals(blob)).toBe(true);
    expect(slow.waited()).toBeGreaterThan(0);
    const before = s.connections.length;
    const again = slowSink(2 ** 20, 4, 0);
    expect(await getStreaming(new URL(`${s.url}/blob`), {}, 10_000, again.sink)).toEqual({ length: blob.length });
    expect(again.bytes().equals(blob)).toBe(true);
    expect(s.connections.length).toBe(before);
  });

  it('answers a redirect or another status without touching the sink, and rejects a body cut short or stopped', async () => {
    const untouched = slowSink(10, 1, 0);
    expect(await getStreaming(new URL(`${s.url}/moved`), {}, 10_000, untouched.sink)).toEqual({ location: `${s.url}/blob` });
    expect(await getStreaming(new URL(`${s.url}/nothing`), {}, 10_000, untouched.sink)).toEqual({
      status: 404,
      text: '{"errors":[{"code":"BLOB_UNKNOWN"}]}',
    });
    expect(untouched.bytes().length).toBe(0);
    await expect(getStreaming(new URL(`${s.url}/short`), {}, 10_000, slowSink(2 ** 20, 8, 0).sink)).rejects.toThrow(
      new RegExp(`cut off after ${2 ** 20} of ${blob.length} bytes`),
    );
    const stopped = slowSink(2 ** 16, 1, 60_000);
    const streaming = getStreaming(new URL(`${s.url}/blob`), {}, 10_000, stopped.sink);
    await until(() => stopped.waited() > 0);
    stopped.flow().stop(new Error('the disk is full'));
    await expect(streaming).rejects.toThrow('the disk is full');
  });
});
