import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { createServer, get as httpGet, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startSiteCache } from './site-cache.js';

const MiB = 2 ** 20;
const sha256 = (data: Uint8Array) => createHash('sha256').update(data).digest('hex');
const repository = 'volumes/w/v';
const token = 'Bearer good';

/** A promise and the function that resolves it. */
function gate(): { open(): void; opened: Promise<void> } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { open, opened };
}

/**
 * A blob store on loopback: the blobs of `repository` to the token `good`, a 401 with its
 * challenge to any other; `sendBody` decides how a GET's body goes out (whole by default).
 */
async function startStore() {
  const blobs = new Map<string, Buffer>();
  const gets: string[] = [];
  const store = {
    blobs,
    gets,
    sendBody: (res: ServerResponse, bytes: Buffer): unknown => res.end(bytes),
    url: '',
    server: createServer((req, res) => {
      const hex = /\/blobs\/sha256:([0-9a-f]{64})$/.exec(req.url ?? '')?.[1];
      if (req.headers.authorization !== token) {
        res.writeHead(401, { 'www-authenticate': 'Bearer realm="http://gateway/token",service="tern"' });
        return void res.end('{"errors":[{"code":"UNAUTHORIZED"}]}');
      }
      const bytes = hex && req.url!.startsWith(`/v2/${repository}/`) ? blobs.get(hex) : undefined;
      if (!bytes) {
        res.writeHead(404);
        return void res.end('{"errors":[{"code":"BLOB_UNKNOWN"}]}');
      }
      res.writeHead(200, { 'content-length': String(bytes.length), 'content-type': 'application/octet-stream' });
      if (req.method === 'HEAD') return void res.end();
      gets.push(hex!);
      store.sendBody(res, bytes);
    }),
  };
  await new Promise<void>((resolve) => store.server.listen(0, '127.0.0.1', resolve));
  store.url = `http://127.0.0.1:${(store.server.address() as AddressInfo).port}`;
  return store;
}

/** A GET over node:http whose body is left unread until the caller reads it. */
function getPaused(url: string): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => httpGet(url, { headers: { authorization: token } }, resolve).on('error', reject));
}

async function bodyOf(res: IncomingMessage): Promise<Buffer> {
  const pieces: Buffer[] = [];
  for await (const piece of res) pieces.push(piece as Buffer);
  return Buffer.concat(pieces);
}

describe('SiteCache', () => {
  let dir: string;
  let store: Awaited<ReturnType<typeof startStore>>;
  let cache: Awaited<ReturnType<typeof startSiteCache>>;
  let failures: string[];
  const blobUrl = (hex: string) => `${cache.url}/v2/${repository}/blobs/sha256:${hex}`;
  const get = (hex: string, headers: Record<string, string> = {}) => fetch(blobUrl(hex), { headers: { authorization: token, ...headers } });

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tern-site-cache-spec-'));
    store = await startStore();
    failures = [];
    cache = await startSiteCache(
      { upstream: store.url, dir, maxBytes: 64 * MiB, failed: (message) => failures.push(message) },
      0,
      '127.0.0.1',
    );
  });

  afterEach(async () => {
    for (const server of [cache.server, store.server]) server.closeAllConnections();
    await cache.close();
    await new Promise((resolve) => store.server.close(resolve));
    await rm(dir, { recursive: true, force: true });
  });

  /** Until the cache has reported `count` failed downloads (a machine may see its transfer cut first). */
  async function heard(count: number): Promise<void> {
    for (const began = Date.now(); failures.length < count && Date.now() - began < 5_000;)
      await new Promise((resolve) => setTimeout(resolve, 10));
  }

  /** A blob of `bytes` in the store; its digest. */
  function put(bytes: Buffer): string {
    const hex = sha256(bytes);
    store.blobs.set(hex, bytes);
    return hex;
  }

  /** The store sends half of each blob, then the rest once `rest` opens (or after 10 s regardless). */
  function sendInTwo(rest: Promise<void>): { finished: () => boolean } {
    let finished = false;
    store.sendBody = (res, bytes) => {
      res.write(bytes.subarray(0, bytes.length / 2));
      const end = () => {
        res.end(bytes.subarray(bytes.length / 2));
        finished = true;
      };
      Promise.race([rest, new Promise((resolve) => setTimeout(resolve, 10_000).unref())]).then(end, end);
    };
    return { finished: () => finished };
  }

  it("sends a missed blob's first bytes before the store has sent all of it, and keeps it once verified", async () => {
    const blob = randomBytes(MiB);
    const hex = put(blob);
    const rest = gate();
    const store = sendInTwo(rest.opened);

    const res = await get(hex);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-length')).toBe(String(blob.length));
    const reader = res.body!.getReader();
    const first = await reader.read();
    expect(first.value!.length).toBeGreaterThan(0);
    expect(store.finished()).toBe(false);
    rest.open();
    const pieces = [first.value!];
    for (let read = await reader.read(); !read.done; read = await reader.read()) pieces.push(read.value);
    expect(sha256(Buffer.concat(pieces))).toBe(hex);
    expect(cache.cache.stats).toMatchObject({
      misses: 1,
      hits: 0,
      upstreamBytes: blob.length,
      servedBytes: blob.length,
      keptBytes: blob.length,
    });
    expect(await readdir(dir)).toEqual([hex]);
    // Written and read back with direct I/O: the cache's blobs take no page cache (util-linux fincore).
    const resident = execFileSync('fincore', ['--bytes', '--noheadings', '--raw', '--output', 'RES', join(dir, hex)], { encoding: 'utf8' });
    expect(Number(resident.trim())).toBe(0);
  });

  it('gives machines asking during one download the same verified bytes from one GET, a slow one stalling no other', async () => {
    const blob = randomBytes(16 * MiB);
    const hex = put(blob);
    const rest = gate();
    const sending = sendInTwo(rest.opened);

    // Three machines ask while the store holds back the second half; the third reads nothing yet.
    const [a, b, slow] = await Promise.all([getPaused(blobUrl(hex)), getPaused(blobUrl(hex)), getPaused(blobUrl(hex))]);
    expect(sending.finished()).toBe(false);
    rest.open();
    const [fromA, fromB] = await Promise.all([bodyOf(a), bodyOf(b)]);
    expect(sha256(fromA)).toBe(hex);
    expect(sha256(fromB)).toBe(hex);
    // The slow machine's bytes waited in the cache's file, not in the download's way.
    expect(cache.cache.stats.keptBytes).toBe(blob.length);
    expect(sha256(await bodyOf(slow))).toBe(hex);
    expect(store.gets).toEqual([hex]);
    expect(failures).toEqual([]);
    expect(cache.cache.stats).toMatchObject({ misses: 3, hits: 0, upstreamBytes: blob.length, servedBytes: 3 * blob.length });

    // Kept: the next machine reads it from the cache, no GET to the store.
    expect(sha256(new Uint8Array(await (await get(hex)).arrayBuffer()))).toBe(hex);
    expect(store.gets).toEqual([hex]);
    expect(cache.cache.stats.hits).toBe(1);
  });

  it('serves many blobs downloading at once, more than its buffers hold, each exactly its own bytes', async () => {
    // 24 blobs of 3 slabs each, two machines asking for each: 48 responses and 24 downloads at once, through 2 slabs.
    await cache.close();
    cache = await startSiteCache(
      { upstream: store.url, dir, maxBytes: 256 * MiB, bufferBytes: 2 * MiB, failed: (message) => failures.push(message) },
      0,
      '127.0.0.1',
    );
    const blobs = Array.from({ length: 24 }, (_, i) => randomBytes(2 * MiB + 1 + i));
    const hexes = blobs.map(put);
    const wrong = Buffer.from(blobs[7]!);
    wrong[MiB + 3]! ^= 0xff;
    store.blobs.set(hexes[7]!, wrong);
    const answers = await Promise.all(
      [...hexes, ...hexes].map(async (hex) => {
        const res = await get(hex);
        return res.arrayBuffer().then(
          (body) => sha256(new Uint8Array(body)),
          () => 'cut',
        );
      }),
    );
    expect(answers).toEqual([...hexes, ...hexes].map((hex, i) => (i % 24 === 7 ? 'cut' : hex)));
    // The wrong blob's second machine may ask after its first download failed: a download of its own.
    await heard(1);
    for (const failure of failures) expect(failure).toMatch(new RegExp(`sent blob ${hexes[7]} hashing to [0-9a-f]{64}; refused$`));
    expect(store.gets.filter((hex) => hex !== hexes[7]).sort()).toEqual(hexes.filter((_, i) => i !== 7).sort());
    expect((await readdir(dir)).sort()).toEqual(hexes.filter((_, i) => i !== 7).sort());
    expect(cache.cache.stats.keptBytes).toBe(blobs.reduce((n, b, i) => (i === 7 ? n : n + b.length), 0));
  }, 120_000);

  it("cuts every machine's transfer of a blob the store sends wrong or stops sending, keeps nothing, and downloads it anew", async () => {
    const blob = randomBytes(2 * MiB);
    const hex = put(blob);
    const wrong = Buffer.from(blob);
    wrong[wrong.length - 10]! ^= 0xff;
    store.blobs.set(hex, wrong);

    const answers = await Promise.all([get(hex), get(hex)]);
    for (const res of answers) {
      expect(res.status).toBe(200);
      await expect(res.arrayBuffer()).rejects.toThrow();
    }
    await heard(1);
    expect(failures).toEqual([expect.stringMatching(new RegExp(`sent blob ${hex} hashing to [0-9a-f]{64}; refused$`))]);
    expect(cache.cache.stats.keptBytes).toBe(0);
    expect(await readdir(dir)).toEqual([]);

    // A store that goes away mid-way: the same.
    store.blobs.set(hex, blob);
    store.sendBody = (res, bytes) => {
      res.write(bytes.subarray(0, MiB), () => res.destroy());
    };
    await expect((await get(hex)).arrayBuffer()).rejects.toThrow();
    await heard(2);
    expect(failures[1]).toMatch(`cannot read blob ${hex} from the store ${store.url}`);
    expect(await readdir(dir)).toEqual([]);

    store.sendBody = (res, bytes) => res.end(bytes);
    expect(sha256(new Uint8Array(await (await get(hex)).arrayBuffer()))).toBe(hex);
    expect(store.gets).toEqual([hex, hex, hex]);
    expect(await readdir(dir)).toEqual([hex]);
  });

  it('answers a range of a kept blob with 206 and exactly its bytes, and 416 to a range it does not have', async () => {
    const blob = randomBytes(MiB + 17);
    const hex = put(blob);
    expect(sha256(new Uint8Array(await (await get(hex)).arrayBuffer()))).toBe(hex);
    const size = blob.length;

    for (const [range, start, end] of [
      ['bytes=100-199', 100, 200],
      ['bytes=0-0', 0, 1],
      [`bytes=${size - 10}-`, size - 10, size],
      ['bytes=-10', size - 10, size],
      [`bytes=5-${size * 2}`, 5, size],
    ] as const) {
      const res = await get(hex, { range });
      expect(res.status).toBe(206);
      expect(res.headers.get('content-range')).toBe(`bytes ${start}-${end - 1}/${size}`);
      expect(res.headers.get('content-length')).toBe(String(end - start));
      expect(Buffer.from(await res.arrayBuffer()).equals(blob.subarray(start, end))).toBe(true);
    }
    for (const range of ['bytes=200-100', `bytes=${size}-`, 'bytes=-0', 'items=0-1', 'bytes=0-1,4-5', 'bytes=x-y']) {
      const res = await get(hex, { range });
      expect(res.status).toBe(416);
      expect(res.headers.get('content-range')).toBe(`bytes */${size}`);
      await res.arrayBuffer();
    }
    expect(store.gets).toEqual([hex]);
  });

  it('answers a range of a blob still downloading once the blob is verified, with exactly its bytes', async () => {
    const blob = randomBytes(MiB);
    const hex = put(blob);
    const rest = gate();
    const sending = sendInTwo(rest.opened);
    const res = await get(hex, { range: 'bytes=10-99' });
    expect(res.status).toBe(206);
    const body = res.arrayBuffer();
    setTimeout(rest.open, 100);
    expect(Buffer.from(await body).equals(blob.subarray(10, 100))).toBe(true);
    expect(sending.finished()).toBe(true);
  });

  it("passes the store's refusals on as they came, and counts them", async () => {
    const hex = put(randomBytes(1000));
    const anonymous = await fetch(blobUrl(hex));
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toBe('Bearer realm="http://gateway/token",service="tern"');
    const unknown = await get(sha256(Buffer.from('not in the store')));
    expect(unknown.status).toBe(404);
    expect(await unknown.text()).toContain('answered 404 for blob');
    const head = await fetch(blobUrl(hex), { method: 'HEAD', headers: { authorization: token } });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-length')).toBe('1000');
    expect(cache.cache.stats).toMatchObject({ refused: 2, misses: 1 });
    // The HEAD's miss downloads the blob: kept before the test's directory goes.
    for (const began = Date.now(); cache.cache.stats.keptBytes < 1000 && Date.now() - began < 5_000;)
      await new Promise((resolve) => setTimeout(resolve, 10));
    expect(cache.cache.stats.keptBytes).toBe(1000);
  });
});
