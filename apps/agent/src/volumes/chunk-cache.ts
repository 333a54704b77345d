import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { LRUCache } from 'lru-cache';

/** A chunk's bytes as its source gives them: whole (the gateway's answer) or as a stream (the registry's). */
export type ChunkBytes = Uint8Array | ReadableStream<Uint8Array>;

/**
 * Volume chunks on this machine, one file per chunk named by its sha256 (`<dir>/<hex>`), kept
 * up to `maxBytes` and evicted least recently used first. A chunk is verified against its name
 * before it is kept, so a cached one is never wrong and a second mount downloads nothing.
 */
export class ChunkCache {
  private readonly lru: LRUCache<string, number>;
  private readonly inFlight = new Map<string, Promise<string>>();
  private loaded?: Promise<void>;

  constructor(
    readonly dir: string,
    maxBytes: number,
  ) {
    this.lru = new LRUCache<string, number>({
      maxSize: maxBytes,
      sizeCalculation: (size) => Math.max(1, size),
      dispose: (_size, hex, reason) => {
        if (reason === 'evict' || reason === 'delete') void rm(join(this.dir, hex), { force: true }).catch(() => undefined);
      },
    });
  }

  /** Chunks kept by an earlier run, oldest use first (by access time). */
  private load(): Promise<void> {
    this.loaded ??= (async () => {
      await mkdir(this.dir, { recursive: true, mode: 0o700 });
      const found: { hex: string; size: number; used: number }[] = [];
      for (const name of await readdir(this.dir)) {
        if (!/^[a-f0-9]{64}$/.test(name)) {
          await rm(join(this.dir, name), { force: true, recursive: true });
          continue;
        }
        const s = await stat(join(this.dir, name));
        found.push({ hex: name, size: s.size, used: s.atimeMs });
      }
      for (const f of found.sort((a, b) => a.used - b.used)) this.lru.set(f.hex, f.size);
    })();
    return this.loaded;
  }

  /**
   * The path of the chunk's file, fetched with `download` when this machine does not hold it
   * (`from` names the source in the refusal of a chunk whose bytes do not match its digest).
   */
  async ensure(hex: string, download: () => Promise<ChunkBytes>, from = 'the gateway'): Promise<string> {
    await this.load();
    if (this.lru.get(hex) !== undefined) return join(this.dir, hex);
    let p = this.inFlight.get(hex);
    if (!p) {
      p = this.fetch(hex, download, from).finally(() => this.inFlight.delete(hex));
      this.inFlight.set(hex, p);
    }
    return p;
  }

  has(hex: string): boolean {
    return this.lru.has(hex);
  }

  /** Bytes held. */
  get size(): number {
    return this.lru.calculatedSize;
  }

  /**
   * Streams the chunk into a file beside its final name, hashing it as it passes (memory: the
   * stream's buffers, whatever the chunk's size), and renames it only once its digest matches:
   * a wrong, truncated or half-written chunk (a refused source, a full disk, a crash) never
   * lies under a good name.
   */
  private async fetch(hex: string, download: () => Promise<ChunkBytes>, from: string): Promise<string> {
    const tmp = join(this.dir, `.tmp-${hex}-${randomBytes(4).toString('hex')}`);
    const hash = createHash('sha256');
    let size = 0;
    const digest = new Transform({
      transform(piece: Buffer, _encoding, done) {
        hash.update(piece);
        size += piece.length;
        done(null, piece);
      },
    });
    try {
      const data = await download();
      const source = data instanceof Uint8Array ? Readable.from([data]) : Readable.fromWeb(data as WebReadableStream);
      await pipeline(source, digest, createWriteStream(tmp, { mode: 0o600 })).catch((e: Error) => {
        // A source cut off mid-chunk, a full disk: say which chunk and from where.
        throw new Error(`volume chunk ${hex} from ${from} could not be kept: ${e.message}`, { cause: e });
      });
      const actual = hash.digest('hex');
      if (actual !== hex) throw new Error(`volume chunk ${hex} from ${from} hashes to ${actual}; refusing it`);
      await rename(tmp, join(this.dir, hex));
    } catch (e) {
      await rm(tmp, { force: true });
      throw e;
    }
    this.lru.set(hex, size);
    return join(this.dir, hex);
  }
}
