import type { ServerResponse } from 'node:http';
import { BufferPool } from './buffer-pool.js';
import { DIRECT_ALIGN, openBlobFile, readAt } from './direct-io.js';

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
  /** Reads `length` bytes from `position` of the file into `buffer` (as `readAt`): the part of it holding them. */
  read(buffer: Buffer, position: number, length: number): Promise<Buffer>;
  /** One response is done with the file. */
  release(): void;
}

/** A kept blob's file, opened for one response: it stays readable to it if the blob is evicted meanwhile. */
export async function openKept(path: string): Promise<BlobBytes> {
  const blob = await openBlobFile(path, 'r');
  const size = await blob.file.stat().then(
    (s) => s.size,
    async (e: Error) => {
      await blob.file.close();
      throw e;
    },
  );
  return {
    ready: () => Promise.resolve(size),
    sendable: (_offset, end) => Promise.resolve(end),
    read: (buffer, position, length) => readAt(blob, buffer, position, length),
    release: () => void blob.file.close().catch(() => undefined),
  };
}

/** How much of a blob's file one read takes, and one write to a machine's socket gives. */
const SEND_BYTES = 2 ** 20;
/**
 * One buffer per response sending, reused by the next response (the kept ones bound the memory
 * held between bursts; a response's buffer is its own, so a slow machine holds up no other).
 */
const sendBuffers = new BufferPool(SEND_BYTES + DIRECT_ALIGN, { most: Number.POSITIVE_INFINITY, keep: 32, aligned: true });

/**
 * Sends bytes `[start, end)` of a blob as the body of `res`, as they become sendable: each read
 * from the file into the response's one buffer, then written to the socket whole before the next
 * read reuses it. Rejects when the blob turned out wrong, or the machine went away.
 */
export async function sendBlob(
  bytes: BlobBytes,
  start: number,
  end: number,
  res: ServerResponse,
  sent: (n: number) => void,
): Promise<void> {
  const buffer = sendBuffers.take()!;
  // Settles once the socket is done with the buffer (the last write's callback), however that write ended.
  let lent: Promise<unknown> = Promise.resolve();
  try {
    for (let offset = start; offset < end;) {
      const bound = await bytes.sendable(offset, end);
      const piece = await bytes.read(buffer, offset, Math.min(SEND_BYTES, bound - offset));
      if (piece.length === 0) throw new Error(`the blob's file ends at ${offset}, before its ${end} bytes`);
      const write = written(res, piece);
      lent = write.lent;
      await write.done;
      offset += piece.length;
      sent(piece.length);
    }
    res.end();
  } finally {
    // A write cut short leaves the buffer with the socket until its callback: lent again only then.
    lent.then(
      () => sendBuffers.give(buffer),
      () => undefined,
    );
  }
}

/**
 * `done` resolves once `piece` is handed to the kernel, and rejects when the connection is gone
 * first; `lent` settles when the socket no longer holds the piece (the write's callback).
 */
function written(res: ServerResponse, piece: Buffer): { done: Promise<void>; lent: Promise<unknown> } {
  if (res.destroyed) return { done: Promise.reject(new Error('the machine closed the connection')), lent: Promise.resolve() };
  let wrote!: (e: Error | null | undefined) => void;
  const lent = new Promise<Error | null | undefined>((resolve) => (wrote = resolve));
  const done = new Promise<void>((resolve, reject) => {
    const closed = () => reject(new Error('the machine closed the connection'));
    res.once('close', closed);
    lent.then((e) => {
      res.off('close', closed);
      if (e) reject(e);
      else resolve();
    }, reject);
  });
  res.write(piece, (e) => wrote(e));
  return { done, lent };
}
