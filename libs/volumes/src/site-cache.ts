import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { LRUCache } from 'lru-cache';
import { getToFile } from './http-get.js';

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
 * one download.
 */
export interface SiteCacheOptions {
  /** The blob store (the registry): `http(s)://host[:port]`. */
  upstream: string;
  /** Where the blobs are kept, one file per digest. */
  dir: string;
  /** Most bytes kept; least recently used blobs go first. */
  maxBytes: number;
  timeoutMs?: number;
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
  private readonly downloads = new Map<string, Promise<void>>();
  private readonly counts = { upstreamBytes: 0, servedBytes: 0, hits: 0, misses: 0, refused: 0 };
  private readonly timeoutMs: number;
  private loaded?: Promise<void>;

  constructor(private readonly options: SiteCacheOptions) {
    this.timeoutMs = options.timeoutMs ?? 300_000;
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
    if (this.kept.get(hex) !== undefined) this.counts.hits++;
    else {
      this.counts.misses++;
      await this.download(repository, hex, req.headers.authorization!);
    }
    await this.send(hex, req.method === 'HEAD', res);
  }

  /** The store's answer to a HEAD with the requester's token: allowed, or what to pass on. */
  private async askStore(
    repository: string,
    hex: string,
    authorization: string | undefined,
  ): Promise<{ size: number } | { refused: number; headers: Record<string, string>; text: string }> {
    const res = await fetch(`${this.options.upstream}/v2/${repository}/blobs/sha256:${hex}`, {
      method: 'HEAD',
      headers: authorization ? { authorization } : {},
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    if (res.ok) return { size: Number(res.headers.get('content-length')) };
    const challenge = res.headers.get('www-authenticate');
    return {
      refused: res.status,
      headers: { 'content-type': 'application/json', ...(challenge ? { 'www-authenticate': challenge } : {}) },
      text: JSON.stringify({ error: `the store ${this.options.upstream} answered ${res.status} for blob ${hex} of ${repository}` }),
    };
  }

  /** One download per blob at a time: the others wait for it and read the kept file. */
  private download(repository: string, hex: string, authorization: string): Promise<void> {
    let running = this.downloads.get(hex);
    if (!running) {
      running = this.fetchBlob(repository, hex, authorization).finally(() => this.downloads.delete(hex));
      this.downloads.set(hex, running);
    }
    return running;
  }

  private async fetchBlob(repository: string, hex: string, authorization: string): Promise<void> {
    const tmp = join(this.options.dir, `.tmp-${hex}-${randomBytes(4).toString('hex')}`);
    try {
      const url = `${this.options.upstream}/v2/${repository}/blobs/sha256:${hex}`;
      const got = await getToFile(url, { authorization }, tmp, this.timeoutMs, (n) => (this.counts.upstreamBytes += n)).catch(
        (e: Error) => {
          throw new Error(`cannot read blob ${hex} from the store ${this.options.upstream}: ${e.message}`);
        },
      );
      if ('status' in got) throw new Error(`the store ${this.options.upstream} answered ${got.status} for blob ${hex}`);
      if (got.sha256 !== hex) throw new Error(`the store ${this.options.upstream} sent blob ${hex} hashing to ${got.sha256}; refused`);
      await rename(tmp, this.path(hex));
      this.kept.set(hex, got.size);
    } catch (e) {
      await rm(tmp, { force: true });
      throw e;
    }
  }

  private async send(hex: string, headOnly: boolean, res: ServerResponse): Promise<void> {
    const file = this.path(hex);
    const size = (await stat(file)).size;
    res.writeHead(200, {
      'content-type': 'application/octet-stream',
      'content-length': String(size),
      'docker-content-digest': `sha256:${hex}`,
    });
    if (headOnly) return void res.end();
    this.counts.servedBytes += size;
    await pipeline(createReadStream(file), res);
  }

  private path(hex: string): string {
    return join(this.options.dir, hex);
  }
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
      // The store unreachable or a blob refused on its way in: the machine hears why, as a 502.
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
