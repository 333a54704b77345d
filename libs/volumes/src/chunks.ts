import { createHash } from 'node:crypto';

export function sha256Hex(data: Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

/**
 * Cuts a byte stream into chunks of exactly `size` bytes (the last one shorter; none for an
 * empty stream). Holds at most one chunk: the caller stores each before asking for the next,
 * so a file of any size passes with memory bounded by the chunk size.
 */
export async function* chunksOf(source: AsyncIterable<Uint8Array>, size: number): AsyncGenerator<Buffer> {
  let chunk = Buffer.allocUnsafe(size);
  let filled = 0;
  for await (const data of source) {
    let offset = 0;
    while (offset < data.length) {
      const n = Math.min(size - filled, data.length - offset);
      chunk.set(data.subarray(offset, offset + n), filled);
      filled += n;
      offset += n;
      if (filled === size) {
        yield chunk;
        // A fresh buffer: the consumer may still hold the one it was given (an object store put).
        chunk = Buffer.allocUnsafe(size);
        filled = 0;
      }
    }
  }
  if (filled > 0) yield chunk.subarray(0, filled);
}

/**
 * Runs `work` over `items` with at most `limit` at once (chunk fetches, uploads and checks). The
 * first failure stops new work and is thrown once the work in flight has settled: nothing of this
 * call is still writing when its caller sees the error (and cleans up, or retries).
 */
export async function inParallel<T>(items: readonly T[], limit: number, work: (item: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  let failure: { error: unknown } | undefined;
  const worker = async () => {
    while (!failure && next < items.length) {
      try {
        await work(items[next++]!);
      } catch (error) {
        failure ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failure) throw failure.error;
}
