import { open } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import { BufferPool } from './buffer-pool.js';

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

/** How much of a blob's file one read takes, and one write to a machine's socket gives. */
const SEND_BYTES = 2 ** 20;
/**
 * One buffer per response sending, reused by the next response (the kept ones bound the memory
 * held between bursts; a response's buffer is its own, so a slow machine holds up no other).
 */
const sendBuffers = new BufferPool(SEND_BYTES, { most: Number.POSITIVE_INFINITY, keep: 32 });

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
  let reuse = true;
  try {
    for (let offset = start; offset < end;) {
      const bound = await bytes.sendable(offset, end);
      const n = await bytes.read(buffer.subarray(0, Math.min(buffer.length, bound - offset)), offset);
      if (n === 0) throw new Error(`the blob's file ends at ${offset}, before its ${end} bytes`);
      reuse = false;
      await written(res, buffer.subarray(0, n));
      reuse = true;
      offset += n;
      sent(n);
    }
    res.end();
  } finally {
    // A write cut short may leave the buffer with the socket: it is dropped, not lent again.
    sendBuffers.give(buffer, reuse);
  }
}

/** Resolves once `piece` is handed to the kernel (the buffer is free again); rejects when the connection is gone first. */
function written(res: ServerResponse, piece: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    if (res.destroyed) return reject(new Error('the machine closed the connection'));
    const closed = () => reject(new Error('the machine closed the connection'));
    res.once('close', closed);
    res.write(piece, (e) => {
      res.off('close', closed);
      if (e) reject(e);
      else resolve();
    });
  });
}
