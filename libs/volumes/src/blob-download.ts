import { rename, rm } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import type { BlobBytes } from './blob-bytes.js';
import { BufferPool } from './buffer-pool.js';
import { alignDown, type BlobFile, DIRECT_ALIGN, openBlobFile, readAt, writeAt } from './direct-io.js';
import { getBody } from './http-get.js';
import { type BodyFlow, type BodySink, getStreaming } from './http-into.js';
import { type Sha256Stream, sha256Stream } from './sha256-threads.js';

/** Where a download reads a blob from and keeps it. */
export interface BlobDownloadSource {
  hex: string;
  /** The blob's URL in the store, and the store as messages name it. */
  url: string;
  store: string;
  authorization: string;
  /** The size the store's HEAD answered, for a GET whose answer does not say. */
  headSize: number;
  /** The temporary file it grows in, and the digest's name it is kept under once verified. */
  tmp: string;
  path: string;
  timeoutMs: number;
  /** Where its slabs come from (`downloadSlabs`). */
  slabs: BufferPool;
  /** Hears each piece's length as it arrives from the store. */
  onBytes(n: number): void;
}

/** A download's bytes pass through slabs of this size: each is written to the file, and hashed, whole. */
const SLAB_BYTES = 2 ** 20;
/** Slabs one download holds at once (one filling from the socket, the others being written and hashed). */
const SLABS_PER_DOWNLOAD = 4;

/**
 * The slabs of a site cache's downloads, over shared memory (a worker thread hashes them where
 * they lie) aligned for direct I/O: at most `bytes` of them out, whatever the number of downloads
 * (a download finding none pauses its socket until one comes back), all kept once made.
 */
export function downloadSlabs(bytes: number): BufferPool {
  const most = Math.max(1, Math.floor(bytes / SLAB_BYTES));
  return new BufferPool(SLAB_BYTES, { most, keep: most, aligned: true });
}

/** A slab's bytes that arrived but fill no whole slab go to the file after this long, for the machines reading it. */
const FLUSH_MS = 5;

/** One slab of a download: its bytes `[start, start + bytes.length)` of the blob, filled, written and hashed so far. */
interface Slab {
  buffer: Buffer;
  bytes: Buffer;
  start: number;
  filled: number;
  written: number;
  hashed: boolean;
  given: boolean;
}

/**
 * One blob coming from the store into a temporary file that any number of responses read while
 * it grows: each reads the file up to what has been written and then waits for more, at its own
 * pace, so a slow machine neither stalls the download for the others nor holds bytes in memory.
 * The socket reads the blob straight into slabs of shared memory (getStreaming), each written to
 * the file in one piece and hashed by a worker thread reading the same memory, so the event loop
 * neither copies nor hashes the bytes. Only a blob whose sha256 is its digest is renamed to its
 * digest's name; until then each response holds back its last byte, so that when the blob turns
 * out wrong or the store stops mid-way every response is cut (its client sees a failed transfer,
 * never a short body that looks whole) and nothing is kept.
 */
export class BlobDownload implements BlobBytes, BodySink {
  private size?: number;
  private file?: BlobFile;
  private received = 0;
  private written = 0;
  private whole = false;
  private failure?: Error;
  private readers = 0;
  private lettingGo = false;
  private closed = false;
  private moved!: () => void;
  private advanced = this.nextAdvance();
  private readonly slabs: Slab[] = [];
  private readonly sha: Sha256Stream = sha256Stream();
  /** The last slab's hash posted: the thread answers in order, so once it settles all have. */
  private hashing: Promise<void> = Promise.resolve();
  private writing?: Promise<void>;
  /** Whether a slab's bytes short of a whole slab go to the file now (the flush timer ran, or the body is whole). */
  private flushDue = false;
  private flushTimer?: NodeJS.Timeout;
  private flow?: BodyFlow;
  /** Whether the socket waits for room (`more` is due once a slab comes free). */
  private waitingForRoom = false;
  private readonly roomAgain = () => {
    if (!this.waitingForRoom) return;
    this.waitingForRoom = false;
    this.flow?.more();
  };
  /** Settles once the blob is kept under its digest's name, or has failed and left nothing. */
  readonly done: Promise<number>;

  constructor(private readonly source: BlobDownloadSource) {
    this.done = this.run();
  }

  /** One more response reads the blob; each calls `release` when done. */
  attach(): void {
    this.readers++;
  }

  release(): void {
    if (--this.readers === 0 && this.lettingGo) this.close();
  }

  /** No response attaches any more (the blob is kept, or failed): the file closes once the last is done. */
  letGo(): void {
    this.lettingGo = true;
    if (this.readers === 0) this.close();
  }

  async ready(): Promise<number> {
    for (;;) {
      if (this.failure) throw this.failure;
      if (this.file && this.size !== undefined) return this.size;
      await this.advanced;
    }
  }

  async sendable(offset: number, end: number): Promise<number> {
    for (;;) {
      if (this.failure) throw this.failure;
      if (this.whole) return end;
      // A response whose every byte was sent is whole to its client: the last waits for the digest.
      const bound = Math.min(this.written, end - 1);
      if (bound > offset) return bound;
      await this.advanced;
    }
  }

  read(buffer: Buffer, position: number, length: number): Promise<Buffer> {
    return readAt(this.file!, buffer, position, length);
  }

  /** The body's length, from the store's answer: the file is opened for it before any byte is taken. */
  begin(length: number, flow: BodyFlow): void {
    this.size = length;
    this.flow = flow;
    this.advance();
  }

  space(): Buffer | undefined {
    const last = this.slabs.at(-1);
    if (last && last.filled < last.bytes.length) return last.bytes.subarray(last.filled);
    if (this.failure || this.received >= this.size!) return undefined;
    const buffer = this.slabs.length < SLABS_PER_DOWNLOAD ? this.source.slabs.take() : undefined;
    if (!buffer) {
      // Room comes back when one of this download's slabs is done, or the pool has one again.
      this.waitingForRoom = true;
      if (this.slabs.length === 0) this.source.slabs.whenFree(this.roomAgain);
      return undefined;
    }
    const start = this.received;
    const bytes = buffer.subarray(0, Math.min(buffer.length, this.size! - start));
    this.slabs.push({ buffer, bytes, start, filled: 0, written: 0, hashed: false, given: false });
    return bytes;
  }

  took(n: number): void {
    const slab = this.slabs.at(-1)!;
    slab.filled += n;
    this.received += n;
    this.source.onBytes(n);
    if (slab.filled < slab.bytes.length) return this.flushSoon();
    this.hashing = this.sha.update(slab.bytes).then(
      () => {
        slab.hashed = true;
        this.free(slab);
      },
      (e: Error) => this.fail(e),
    );
    this.write();
  }

  private async run(): Promise<number> {
    const { hex, store, tmp } = this.source;
    try {
      this.file = await openBlobFile(tmp, 'w+');
      try {
        await this.fetch();
      } catch (e) {
        const reason = (e as NodeJS.ErrnoException).code ?? (e as Error).message;
        throw this.failure ?? new Error(`cannot read blob ${hex} from the store ${store}: ${reason}`, { cause: e });
      }
      if (this.received !== this.size)
        throw new Error(`the store ${store} cut blob ${hex} off after ${this.received} of ${this.size} bytes`);
      while (this.written < this.received) {
        if (this.failure) throw this.failure;
        this.flushDue = true;
        this.write();
        await this.writing;
      }
      if (this.failure) throw this.failure;
      const sha256 = await this.sha.digest();
      if (sha256 !== hex) throw new Error(`the store ${store} sent blob ${hex} hashing to ${sha256}; refused`);
      await rename(tmp, this.source.path);
      this.whole = true;
      return this.written;
    } catch (e) {
      this.failure ??= e as Error;
      this.flow?.stop(this.failure);
      this.sha.discard();
      await this.giveBackSlabs();
      await rm(tmp, { force: true });
      throw this.failure;
    } finally {
      clearTimeout(this.flushTimer);
      this.advance();
    }
  }

  /**
   * The store's 200 to the GET, its body into the slabs. Over plain HTTP the socket reads into
   * them; over HTTPS, or from where the store redirects, node:http's pieces are copied in.
   */
  private async fetch(): Promise<void> {
    const { hex, store, url, authorization, timeoutMs } = this.source;
    const first = new URL(url);
    const got =
      first.protocol === 'http:'
        ? await getStreaming(first, { authorization }, timeoutMs, this)
        : await getBody(url, { authorization }, timeoutMs);
    if ('status' in got) throw (this.failure = new Error(`the store ${store} answered ${got.status} for blob ${hex}`));
    if ('length' in got) return;
    if ('location' in got) return this.fetchPieces(await getBody(got.location, {}, timeoutMs));
    return this.fetchPieces(got);
  }

  private async fetchPieces(got: Awaited<ReturnType<typeof getBody>>): Promise<void> {
    const { hex, store, headSize } = this.source;
    if ('status' in got) throw (this.failure = new Error(`the store ${store} answered ${got.status} for blob ${hex}`));
    const body: IncomingMessage = got.body;
    const announced = Number(body.headers['content-length'] ?? headSize);
    if (!Number.isSafeInteger(announced) || announced < 0) {
      body.destroy();
      throw (this.failure = new Error(`the store ${store} did not say the size of blob ${hex}`));
    }
    let wake: (() => void) | undefined;
    this.begin(announced, {
      more: () => wake?.(),
      stop: (reason) => {
        body.destroy(reason);
        wake?.();
      },
    });
    try {
      for await (const piece of body as AsyncIterable<Buffer>) {
        if (this.received + piece.length > announced) throw new Error(`more than the ${announced} bytes announced`);
        for (let at = 0; at < piece.length;) {
          if (this.failure) throw this.failure;
          const room = this.space();
          if (!room) {
            await new Promise<void>((resolve) => (wake = resolve));
            continue;
          }
          const n = piece.copy(room, 0, at);
          at += n;
          this.took(n);
        }
      }
    } finally {
      body.destroy();
    }
  }

  /** The bytes short of a whole slab go to the file in a moment, unless more fill it first. */
  private flushSoon(): void {
    this.flushTimer ??= setTimeout(() => {
      this.flushTimer = undefined;
      this.flushDue = true;
      this.write();
    }, FLUSH_MS);
  }

  /**
   * Writes the slabs' bytes to the file in order, one write at a time: whole slabs, and a part of
   * one once a flush is due. A direct file takes whole blocks only: a part written is cut to its
   * last whole block, and the blob's last bytes go out padded to a block, the file then cut to
   * the blob's size.
   */
  private write(): void {
    if (this.writing || this.failure) return;
    this.writing = (async () => {
      const file = this.file!;
      for (;;) {
        const slab = this.slabs.find((s) => s.written < s.filled);
        if (!slab || this.failure) return;
        let to = slab.filled;
        if (to < slab.bytes.length) {
          if (!this.flushDue) return;
          this.flushDue = false;
          if (file.direct) to = alignDown(to);
          if (to <= slab.written) return;
        }
        await writeAt(file, slab.bytes.subarray(slab.written, to), slab.start + slab.written);
        const end = slab.start + to;
        if (file.direct && end % DIRECT_ALIGN) await file.file.truncate(end);
        slab.written = to;
        this.written = end;
        this.free(slab);
        this.advance();
      }
    })()
      .catch((e: Error) =>
        this.fail(new Error(`cannot write blob ${this.source.hex} to the site cache: ${(e as NodeJS.ErrnoException).code ?? e.message}`)),
      )
      .finally(() => (this.writing = undefined));
  }

  /** A slab written and hashed whole goes back to the pool; a socket waiting for room gets it. */
  private free(slab: Slab): void {
    if (slab.given || !slab.hashed || slab.written < slab.bytes.length) return;
    slab.given = true;
    this.slabs.splice(this.slabs.indexOf(slab), 1);
    this.source.slabs.give(slab.buffer);
    this.roomAgain();
  }

  /** After a failure, once the thread and the file are done with them: the slabs still held. */
  private async giveBackSlabs(): Promise<void> {
    await this.hashing.catch(() => undefined);
    await this.writing;
    for (const slab of this.slabs.splice(0)) {
      if (!slab.given) this.source.slabs.give(slab.buffer);
      slab.given = true;
    }
  }

  private fail(error: Error): void {
    if (this.failure) return;
    this.failure = error;
    this.flow?.stop(error);
    this.advance();
  }

  private advance(): void {
    const moved = this.moved;
    this.advanced = this.nextAdvance();
    moved();
  }

  private nextAdvance(): Promise<void> {
    return new Promise((resolve) => (this.moved = resolve));
  }

  private close(): void {
    if (this.closed || !this.file) return;
    this.closed = true;
    this.file.file.close().catch(() => undefined);
  }
}
