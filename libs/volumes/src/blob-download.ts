import { createHash } from 'node:crypto';
import { type FileHandle, open, rename, rm } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';
import { getBody } from './http-get.js';

/** A blob's bytes as a site cache's responses read them: from its file, as far as may be sent yet. */
export interface BlobBytes {
  /** The blob's size, once known; rejects when the blob cannot be had. */
  ready(): Promise<number>;
  /**
   * Resolves with the end (exclusive) up to which bytes from `offset` of the range ending at
   * `end` may be sent, once that is past `offset`, or is `offset` itself when the range is sent
   * whole; rejects when the blob turned out wrong or could not be read.
   */
  sendable(offset: number, end: number): Promise<number>;
  /** Reads into `into` from `position` of the file; the number of bytes read. */
  read(into: Buffer, position: number): Promise<number>;
  /** One response is done with the file. */
  release(): void;
}

/** A kept blob's file, opened for one response: it stays readable to it if the blob is evicted meanwhile. */
export async function openKept(path: string): Promise<BlobBytes> {
  const file = await open(path, 'r');
  const size = await file.stat().then(
    (s) => s.size,
    async (e: Error) => {
      await file.close();
      throw e;
    },
  );
  return {
    ready: () => Promise.resolve(size),
    sendable: (_offset, end) => Promise.resolve(end),
    read: async (into, position) => (await file.read(into, 0, into.length, position)).bytesRead,
    release: () => void file.close().catch(() => undefined),
  };
}

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
  /** Hears each piece's length as it arrives from the store. */
  onBytes(n: number): void;
}

/**
 * One blob coming from the store into a temporary file, hashed as it is written, that any number
 * of responses read while it grows: each reads the file up to what has been written and then
 * waits for more, at its own pace, so a slow machine neither stalls the download for the others
 * nor holds bytes in memory. Only a blob whose sha256 is its digest is renamed to its digest's
 * name; until then each response holds back its last byte, so that when the blob turns out wrong
 * or the store stops mid-way every response is cut (its client sees a failed transfer, never a
 * short body that looks whole) and nothing is kept.
 */
export class BlobDownload implements BlobBytes {
  private size?: number;
  private file?: FileHandle;
  private written = 0;
  private whole = false;
  private failure?: Error;
  private readers = 0;
  private lettingGo = false;
  private closed = false;
  private moved!: () => void;
  private advanced = this.nextAdvance();
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

  async read(into: Buffer, position: number): Promise<number> {
    return (await this.file!.read(into, 0, into.length, position)).bytesRead;
  }

  private async run(): Promise<number> {
    const { hex, store, tmp } = this.source;
    let body: IncomingMessage | undefined;
    try {
      body = await this.answer();
      this.file = await open(tmp, 'w+', 0o600);
      this.advance();
      const hash = createHash('sha256');
      try {
        for await (const piece of body as AsyncIterable<Buffer>) {
          if (this.written + piece.length > this.size!) throw new Error(`more than the ${this.size} bytes announced`);
          hash.update(piece);
          await writeAll(this.file, piece, this.written);
          this.written += piece.length;
          this.source.onBytes(piece.length);
          this.advance();
        }
      } catch (e) {
        const reason = (e as NodeJS.ErrnoException).code ?? (e as Error).message;
        throw new Error(`cannot read blob ${hex} from the store ${store}: ${reason}`, { cause: e });
      }
      if (this.written !== this.size) throw new Error(`the store ${store} cut blob ${hex} off after ${this.written} of ${this.size} bytes`);
      const sha256 = hash.digest('hex');
      if (sha256 !== hex) throw new Error(`the store ${store} sent blob ${hex} hashing to ${sha256}; refused`);
      await rename(tmp, this.source.path);
      this.whole = true;
      return this.written;
    } catch (e) {
      this.failure = e as Error;
      body?.destroy();
      await rm(tmp, { force: true });
      throw e;
    } finally {
      this.advance();
    }
  }

  /** The store's 200 to the GET, its size noted; a refusal or no answer throws. */
  private async answer(): Promise<IncomingMessage> {
    const { hex, store, url, authorization, timeoutMs, headSize } = this.source;
    const got = await getBody(url, { authorization }, timeoutMs).catch((e: Error) => {
      throw new Error(`cannot read blob ${hex} from the store ${store}: ${e.message}`);
    });
    if ('status' in got) throw new Error(`the store ${store} answered ${got.status} for blob ${hex}`);
    const announced = Number(got.body.headers['content-length'] ?? headSize);
    if (!Number.isSafeInteger(announced) || announced < 0) {
      got.body.destroy();
      throw new Error(`the store ${store} did not say the size of blob ${hex}`);
    }
    this.size = announced;
    return got.body;
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
    this.file.close().catch(() => undefined);
  }
}

/** `piece` written at `position` of `file`, all of it. */
async function writeAll(file: FileHandle, piece: Buffer, position: number): Promise<void> {
  for (let done = 0; done < piece.length;) done += (await file.write(piece, done, piece.length - done, position + done)).bytesWritten;
}

/** One response's bytes `[offset, end)` of a blob, read from its file as they become sendable. */
export class BlobReader extends Readable {
  constructor(
    private readonly bytes: BlobBytes,
    private offset: number,
    private readonly end: number,
    private readonly sent: (n: number) => void,
  ) {
    super({ highWaterMark: 256 * 1024 });
  }

  override _read(size: number): void {
    this.next(size).catch((e: Error) => this.destroy(e));
  }

  private async next(size: number): Promise<void> {
    const bound = await this.bytes.sendable(this.offset, this.end);
    if (this.offset >= bound) return void this.push(null);
    const piece = Buffer.allocUnsafe(Math.min(size, bound - this.offset));
    const n = await this.bytes.read(piece, this.offset);
    if (n === 0) throw new Error(`the blob's file ends at ${this.offset}, before its ${this.end} bytes`);
    this.offset += n;
    this.sent(n);
    this.push(piece.subarray(0, n));
  }
}
