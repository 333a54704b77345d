import { randomBytes } from 'node:crypto';
import { mkdir, open, readdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { LRUCache } from 'lru-cache';
import { VOLUME_CHUNK_BYTES } from '#tern/contracts';

/** A chunk's bytes as its source gives them: whole (the registry's and the gateway's answers) or as a stream. */
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
   * `deliver` is handed the bytes only when this call fetched them (not when they were cached
   * or another call was fetching them already).
   */
  async ensure(hex: string, download: () => Promise<ChunkBytes>, from = 'the gateway', deliver?: Deliver): Promise<string> {
    await this.load();
    if (this.lru.get(hex) !== undefined) return join(this.dir, hex);
    let p = this.inFlight.get(hex);
    if (!p) {
      p = this.fetch(hex, download, from, deliver).finally(() => this.inFlight.delete(hex));
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
   * Takes the chunk's bytes whole (a chunk is at most VOLUME_CHUNK_BYTES: memory holds the
   * chunks in flight, whatever the volume's size), writes them to a file beside its final name
   * while their sha256 is computed, both on libuv's threads (the event loop only receives
   * bytes), and renames the file only once the digest matches: a wrong, truncated or
   * half-written chunk (a refused source, a full disk, a crash) never lies under a good name.
   * `deliver` gets the verified bytes (a mount writes them straight into its tree).
   */
  private async fetch(hex: string, download: () => Promise<ChunkBytes>, from: string, deliver?: Deliver): Promise<string> {
    const tmp = join(this.dir, `.tmp-${hex}-${randomBytes(4).toString('hex')}`);
    let bytes: Uint8Array;
    try {
      const data = await download();
      bytes = data instanceof Uint8Array ? data : await whole(data);
      const [actual] = await Promise.all([
        crypto.subtle.digest('SHA-256', bytes).then((d) => Buffer.from(d).toString('hex')),
        writeWhole(tmp, bytes).catch((e: Error) => {
          // A full disk: say which chunk and from where.
          throw new Error(`volume chunk ${hex} from ${from} could not be kept in ${this.dir}: ${e.message}`, { cause: e });
        }),
      ]);
      if (actual !== hex) throw new Error(`volume chunk ${hex} from ${from} hashes to ${actual}; refusing it`);
      await rename(tmp, join(this.dir, hex));
    } catch (e) {
      await rm(tmp, { force: true });
      throw e;
    }
    this.lru.set(hex, bytes.length);
    await deliver?.(bytes);
    return join(this.dir, hex);
  }
}

/** What a mount does with a chunk's verified bytes while it holds them. */
export type Deliver = (bytes: Uint8Array) => Promise<void>;

/** A chunk given as a stream, read into one buffer; more than a chunk's bytes is refused. */
async function whole(stream: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  const pieces: Uint8Array[] = [];
  let size = 0;
  for await (const piece of Readable.fromWeb(stream as WebReadableStream<Uint8Array>)) {
    size += (piece as Uint8Array).length;
    if (size > VOLUME_CHUNK_BYTES) throw new Error(`more than a chunk's ${VOLUME_CHUNK_BYTES} bytes`);
    pieces.push(piece as Uint8Array);
  }
  return Buffer.concat(pieces, size);
}

/** One file of `bytes`, written by as few calls as the kernel takes. */
async function writeWhole(path: string, bytes: Uint8Array): Promise<void> {
  const handle = await open(path, 'wx', 0o600);
  try {
    for (let at = 0; at < bytes.length;) at += (await handle.write(bytes, at, bytes.length - at, at)).bytesWritten;
  } finally {
    await handle.close();
  }
}
