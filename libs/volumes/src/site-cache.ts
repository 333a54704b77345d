import { randomBytes } from 'node:crypto';
import { mkdir, readdir, rm, stat } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { LRUCache } from 'lru-cache';
import { type BlobBytes, openKept, sendBlob } from './blob-bytes.js';
import { BlobDownload, downloadSlabs } from './blob-download.js';
import { headOf } from './http-get.js';
import type { BufferPool } from './buffer-pool.js';

/**
 * A site's cache in front of the blob store (the registry of volumes and images): the machines
 * of one site (a leaf-node site, a rack, a pool's LAN) read blobs through it, so a blob crosses the site's uplink once however many
 * machines want it, as a Kraken agent or a Spegel mirror spares the uplink.
 *
 * It decides nothing about access. Every request is first asked of the store itself, with the
 * requester's own token (a HEAD: no bytes cross the uplink): only what the store would give
 * that token is served, and the store's refusal (401, 403, 404) is passed on as it came. Bytes
 * are kept by their sha256 and checked on the way in, so a machine gets from the cache exactly
 * the bytes the store holds under the digest it asked for. Concurrent misses of one blob share
 * one download, and its bytes go to every machine asking as they arrive from the store, not once
 * the whole blob is in (blob-download.ts): a blob that turns out wrong cuts their transfers short.
 */
export interface SiteCacheOptions {
  /** The blob store (the registry): `http(s)://host[:port]`. */
  upstream: string;
  /** Where the blobs are kept, one file per digest. */
  dir: string;
  /** Most bytes kept; least recently used blobs go first. */
  maxBytes: number;
  /** Most memory its downloads' buffers take at once, whatever their number (default 128 MiB). */
  bufferBytes?: number;
  timeoutMs?: number;
  /** Hears why a download failed (its machines only see their transfer cut). */
  failed?(message: string): void;
}

/** What the cache has done since it started (`GET /site-cache/stats`). */
export interface SiteCacheStats {
  /** Blob bytes read from the store, across the uplink. */
  upstreamBytes: number;
  /** Blob bytes sent to the site's machines. */
  servedBytes: number;
  hits: number;
  misses: number;
  /** Requests the store refused for the requester's token. */
  refused: number;
  keptBytes: number;
}

/** `GET` answers `{"store": "http(s)://host[:port]"}`: the registry the cache fronts. */
export const SITE_CACHE_STORE_PATH = '/site-cache/store';

const BLOB = /^\/v2\/((?:[a-z0-9]+(?:[._-][a-z0-9]+)*\/)*[a-z0-9]+(?:[._-][a-z0-9]+)*)\/blobs\/sha256:([0-9a-f]{64})$/;

export class SiteCache {
  private readonly kept: LRUCache<string, number>;
  private readonly downloads = new Map<string, BlobDownload>();
  private readonly counts = { upstreamBytes: 0, servedBytes: 0, hits: 0, misses: 0, refused: 0 };
  private readonly timeoutMs: number;
  private readonly slabs: BufferPool;
  private loaded?: Promise<void>;

  constructor(private readonly options: SiteCacheOptions) {
    this.timeoutMs = options.timeoutMs ?? 300_000;
    this.slabs = downloadSlabs(options.bufferBytes ?? 128 * 2 ** 20);
    this.kept = new LRUCache<string, number>({
      maxSize: options.maxBytes,
      sizeCalculation: (size) => Math.max(1, size),
      // A blob evicted while being sent stays readable to that reader (its file is open). One
      // set again ('set') is the same file under the same name: kept.
      dispose: (_size, hex, reason) => {
        if (reason !== 'set') rm(this.path(hex), { force: true }).catch(() => undefined);
      },
    });
  }

  get stats(): SiteCacheStats {
    return { ...this.counts, keptBytes: this.kept.calculatedSize };
  }

  /** The blobs a restarted cache kept on disk (only whole, verified blobs carry a digest's name). */
  load(): Promise<void> {
    this.loaded ??= (async () => {
      await mkdir(this.options.dir, { recursive: true, mode: 0o700 });
      for (const name of await readdir(this.options.dir)) {
        if (/^[0-9a-f]{64}$/.test(name)) this.kept.set(name, (await stat(this.path(name))).size);
        else await rm(this.path(name), { force: true });
      }
    })();
    return this.loaded;
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? '/', 'http://cache').pathname;
    if (path === '/site-cache/stats' && req.method === 'GET') return answer(res, 200, this.stats);
    // Which registry it fronts: a machine sends it only the blobs of that registry's images and volumes.
    if (path === SITE_CACHE_STORE_PATH && req.method === 'GET') return answer(res, 200, { store: this.options.upstream });
    if (path === '/v2/' || path === '/v2') return answer(res, 200, {});
    const blob = BLOB.exec(path);
    if (!blob || (req.method !== 'GET' && req.method !== 'HEAD'))
      return answer(res, 404, {
        error: 'a site cache serves GET and HEAD of /v2/<repository>/blobs/sha256:<digest> only; push to the store itself',
      });
    const [, repository, hex] = blob as unknown as [string, string, string];
    await this.load();
    const allowed = await this.askStore(repository, hex, req.headers.authorization);
    if ('refused' in allowed) {
      this.counts.refused++;
      res.writeHead(allowed.refused, allowed.headers);
      return void res.end(allowed.text);
    }
    let bytes: BlobBytes;
    if (this.kept.get(hex) !== undefined) {
      this.counts.hits++;
      bytes = await openKept(this.path(hex));
    } else {
      this.counts.misses++;
      bytes = this.download(repository, hex, req.headers.authorization!, allowed.size);
    }
    await this.send(hex, bytes, req, res);
  }

  /** The store's answer to a HEAD with the requester's token: allowed, or what to pass on. */
  private async askStore(
    repository: string,
    hex: string,
    authorization: string | undefined,
  ): Promise<{ size: number } | { refused: number; headers: Record<string, string>; text: string }> {
    const res = await headOf(
      `${this.options.upstream}/v2/${repository}/blobs/sha256:${hex}`,
      authorization ? { authorization } : {},
      this.timeoutMs,
    );
    if (res.status >= 200 && res.status < 300) return { size: res.size };
    return {
      refused: res.status,
      headers: { 'content-type': 'application/json', ...(res.challenge ? { 'www-authenticate': res.challenge } : {}) },
      text: JSON.stringify({ error: `the store ${this.options.upstream} answered ${res.status} for blob ${hex} of ${repository}` }),
    };
  }

  /** One download per blob at a time: the others read the same growing file. Attached for the caller, who releases it. */
  private download(repository: string, hex: string, authorization: string, headSize: number): BlobDownload {
    let download = this.downloads.get(hex);
    if (!download) {
      const started = new BlobDownload({
        hex,
        url: `${this.options.upstream}/v2/${repository}/blobs/sha256:${hex}`,
        store: this.options.upstream,
        authorization,
        headSize,
        tmp: join(this.options.dir, `.tmp-${hex}-${randomBytes(4).toString('hex')}`),
        path: this.path(hex),
        timeoutMs: this.timeoutMs,
        slabs: this.slabs,
        onBytes: (n) => (this.counts.upstreamBytes += n),
      });
      // Kept (or not) and out of the map at once: a later request opens the kept file or starts anew.
      const settle = (size?: number) => {
        if (size !== undefined) this.kept.set(hex, size);
        this.downloads.delete(hex);
        started.letGo();
      };
      void started.done.then(settle, (e: Error) => {
        settle();
        this.options.failed?.(e.message);
      });
      this.downloads.set(hex, started);
      download = started;
    }
    download.attach();
    return download;
  }

  /**
   * The blob, or the one range `bytes=a-b` a GET asks for (206; one it does not have: 416). A
   * range of a blob still downloading is answered like the whole blob: its bytes go out as they
   * arrive, its last byte once the whole blob is verified, so the range completes when the
   * download does and never with bytes that may turn out wrong.
   */
  private async send(hex: string, bytes: BlobBytes, req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      const size = await bytes.ready();
      const asked = req.method === 'GET' ? req.headers.range : undefined;
      const range = asked === undefined ? ([0, size] as const) : byteRange(asked, size);
      if (!range) {
        res.writeHead(416, { 'content-type': 'application/json', 'content-range': `bytes */${size}` });
        return void res.end(JSON.stringify({ error: `blob ${hex} has ${size} bytes: no range "${asked}" of them` }));
      }
      const [start, end] = range;
      res.writeHead(asked === undefined ? 200 : 206, {
        'content-type': 'application/octet-stream',
        'content-length': String(end - start),
        'docker-content-digest': `sha256:${hex}`,
        'accept-ranges': 'bytes',
        ...(asked === undefined ? {} : { 'content-range': `bytes ${start}-${end - 1}/${size}` }),
      });
      if (req.method === 'HEAD') return void res.end();
      // The head goes now, not with the first bytes (a blob still downloading may have none yet):
      // a machine whose transfer is then cut sees a body cut short, not an answer missing.
      res.flushHeaders();
      await sendBlob(bytes, start, end, res, (n) => (this.counts.servedBytes += n));
    } finally {
      bytes.release();
    }
  }

  private path(hex: string): string {
    return join(this.options.dir, hex);
  }
}

/**
 * The one range `bytes=a-b`, `bytes=a-` or `bytes=-n` asks for, as [start, end) within a blob of
 * `size` bytes (an end past the blob is its end); undefined when it names no byte of it or is not
 * one range of bytes.
 */
function byteRange(header: string, size: number): readonly [number, number] | undefined {
  const asked = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!asked || (asked[1] === '' && asked[2] === '')) return undefined;
  if (asked[1] === '') {
    const suffix = Number(asked[2]);
    return suffix > 0 && size > 0 ? [Math.max(0, size - suffix), size] : undefined;
  }
  const start = Number(asked[1]);
  const last = asked[2] === '' ? size - 1 : Math.min(Number(asked[2]), size - 1);
  return start <= last ? [start, last + 1] : undefined;
}

function answer(res: ServerResponse, status: number, body: object): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

/** A site cache listening on `host:port` (port 0: any free one); `url` is where machines reach it. */
export async function startSiteCache(
  options: SiteCacheOptions,
  port: number,
  host: string,
): Promise<{ server: Server; cache: SiteCache; url: string; close(): Promise<void> }> {
  const cache = new SiteCache(options);
  await cache.load();
  const server = createServer((req, res) => {
    cache.handle(req, res).catch((e: Error) => {
      // The store unreachable or refusing the GET: the machine hears why, as a 502. Once a blob's
      // bytes are on their way (a blob refused by its digest, a store gone mid-way), its transfer is cut.
      if (!res.headersSent) answer(res, 502, { error: `site cache: ${e.message}` });
      else res.destroy(e);
    });
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  const address = server.address() as AddressInfo;
  return {
    server,
    cache,
    url: `http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
