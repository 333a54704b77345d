import { createCipheriv, createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';

const MiB = 2 ** 20;

/**
 * `total` pseudo-random bytes of `seed` (AES-CTR: no chunk repeats, so none dedups), in 1 MiB
 * pieces, made as they are read; `head` replaces the first bytes (a file a container patched).
 */
export function generated(total: number, seed: string, head?: Uint8Array): ReadableStream<Uint8Array> {
  const key = createHash('sha256').update(seed).digest();
  const cipher = createCipheriv('aes-256-ctr', key, Buffer.alloc(16));
  const zeros = Buffer.alloc(MiB);
  let sent = 0;
  return new ReadableStream({
    pull(controller) {
      if (sent >= total) return controller.close();
      const piece = cipher.update(zeros.subarray(0, Math.min(MiB, total - sent)));
      if (head && sent === 0) piece.set(head.subarray(0, piece.length));
      sent += piece.length;
      controller.enqueue(piece);
    },
  });
}

/** The sha256 hex of a stream's bytes. */
export async function digestOf(stream: ReadableStream<Uint8Array>): Promise<string> {
  const hash = createHash('sha256');
  for await (const piece of stream as unknown as AsyncIterable<Uint8Array>) hash.update(piece);
  return hash.digest('hex');
}

/** Peak and current resident memory of a process, from /proc. */
export async function memoryOf(pid: number): Promise<{ peak: number; now: number }> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)![1]) * 1024;
  return { peak: kib('VmHWM'), now: kib('VmRSS') };
}

/**
 * Samples a process's resident memory every `everyMs` until stopped; the largest seen (and the
 * kernel's own peak, VmHWM, when the process still runs). A process that exits ends the sampling.
 */
export function sampleMemory(pid: number, everyMs = 200): { stop(): Promise<number> } {
  let largest = 0;
  let running = true;
  const sample = async () => {
    const now = await memoryOf(pid).catch(() => undefined);
    if (!now) return (running = false);
    largest = Math.max(largest, now.now);
  };
  const loop = (async () => {
    while (running) {
      await sample();
      await new Promise((r) => setTimeout(r, everyMs));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      const peak = await memoryOf(pid).catch(() => undefined);
      return Math.max(largest, peak?.peak ?? 0);
    },
  };
}
