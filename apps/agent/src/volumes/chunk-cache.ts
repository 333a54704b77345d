import { randomBytes } from 'node:crypto';
import { mkdir, open, readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { LRUCache } from 'lru-cache';
import { VOLUME_CHUNK_BYTES } from '#tern/contracts';
import { sha256Of } from '#tern/volumes';

/** A chunk's bytes as its source gives them: whole (the registry's and the gateway's answers) or as a stream. */
export type ChunkBytes = Uint8Array | ReadableStream<Uint8Array>;

/** Where a chunk's bytes lie in a file of a read-only tree. */
export interface ChunkSpan {
  path: string;
  offset: number;
  size: number;
}

/**
 * Volume chunks on this machine, one file per chunk named by its sha256 (`<dir>/<hex>`), kept
 * up to `maxBytes` and evicted least recently used first. A chunk is verified against its name
 * before it is kept, so a cached one is never wrong and a second mount downloads nothing.
 * Chunks a read-only tree holds are not copied here as well (`deliver`): the cache knows where
 * they lie in the tree's files (`holdInTree`) until the tree goes, and whoever reads them back
 * checks their digest again, since they are not files of its own.
 */
export class ChunkCache {
  private readonly lru: LRUCache<string, number>;
  private readonly inFlight = new Map<string, Promise<string>>();
  /** By digest: a span of a read-only tree's file holding the chunk (not kept across restarts: the trees are, unindexed). */
  private readonly inTrees = new Map<string, ChunkSpan>();
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
      p = this.fetch(hex, download, from, deliver)
        .then(() => join(this.dir, hex))
        .finally(() => this.inFlight.delete(hex));
      this.inFlight.set(hex, p);
    }
    return p;
  }

  has(hex: string): boolean {
    return this.lru.has(hex);
  }

  /**
   * Fetches a chunk this machine lacks and hands its verified bytes to `deliver` without keeping
   * a file of it: for a read-only tree, which keeps the bytes itself (`holdInTree` once it is in
   * place), so a model's weights are written to disk once, not twice. A chunk cached or being
   * fetched by `ensure` already comes from there; two read-only trees missing one chunk at the
   * same moment each fetch it (no file to share it through).
   */
  async deliver(hex: string, download: () => Promise<ChunkBytes>, from: string, deliver: Deliver): Promise<void> {
    await this.load();
    if (this.lru.has(hex) || this.inFlight.has(hex)) {
      const path = await this.ensure(hex, download, from);
      await deliver(await readFile(path));
      return;
    }
    await this.fetch(hex, download, from, deliver, false);
  }

  /** The chunk lies at `span` of a read-only tree's file that is in place, until `forgetTree` names the tree. */
  holdInTree(hex: string, span: ChunkSpan): void {
    this.inTrees.set(hex, span);
  }

  /** Where a read-only tree holds the chunk, if one does; the reader checks the bytes against `hex`. */
  inTree(hex: string): ChunkSpan | undefined {
    return this.inTrees.get(hex);
  }

  /** The tree at `dir` is about to be removed: its chunks are no longer here. */
  forgetTree(dir: string): void {
    for (const [hex, span] of this.inTrees) if (span.path.startsWith(`${dir}/`)) this.inTrees.delete(hex);
  }

  /** Bytes held. */
  get size(): number {
    return this.lru.calculatedSize;
  }

  /**
   * Takes the chunk's bytes whole (a chunk is at most VOLUME_CHUNK_BYTES: memory holds the
   * chunks in flight, whatever the volume's size), writes them to a file beside its final name
   * while their sha256 is computed, both off the event loop (which only receives bytes: libuv's
   * threads write, `sha256Of` hashes), and renames the file only once the digest matches: a wrong, truncated or
   * half-written chunk (a refused source, a full disk, a crash) never lies under a good name.
   * `deliver` gets the verified bytes (a mount writes them straight into its tree). Not `keep`:
   * the bytes are verified and delivered, and no file is written.
   */
  private async fetch(hex: string, download: () => Promise<ChunkBytes>, from: string, deliver?: Deliver, keep = true): Promise<void> {
    const tmp = join(this.dir, `.tmp-${hex}-${randomBytes(4).toString('hex')}`);
    let bytes: Uint8Array;
    try {
      const data = await download();
      bytes = data instanceof Uint8Array ? data : await whole(data);
      const [actual] = await Promise.all([
        sha256Of(bytes),
        keep &&
          writeWhole(tmp, bytes).catch((e: Error) => {
            // A full disk: say which chunk and from where.
            throw new Error(`volume chunk ${hex} from ${from} could not be kept in ${this.dir}: ${e.message}`, { cause: e });
          }),
      ]);
      if (actual !== hex) throw new Error(`volume chunk ${hex} from ${from} hashes to ${actual}; refusing it`);
      if (keep) await rename(tmp, join(this.dir, hex));
    } catch (e) {
      if (keep) await rm(tmp, { force: true });
      throw e;
    }
    if (keep) this.lru.set(hex, bytes.length);
    await deliver?.(bytes);
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
