import { createCipheriv, createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';

const MiB = 2 ** 20;

/** `total` pseudo-random bytes of `seed` (AES-CTR: no chunk repeats, so none dedups), in 1 MiB pieces, made as they are read. */
export function generated(total: number, seed: string): ReadableStream<Uint8Array> {
  const key = createHash('sha256').update(seed).digest();
  const cipher = createCipheriv('aes-256-ctr', key, Buffer.alloc(16));
  const zeros = Buffer.alloc(MiB);
  let sent = 0;
  return new ReadableStream({
    pull(controller) {
      if (sent >= total) return controller.close();
      const piece = cipher.update(zeros.subarray(0, Math.min(MiB, total - sent)));
      sent += piece.length;
      controller.enqueue(piece);
    },
  });
}

/** Peak and current resident memory of a process, from /proc. */
export async function memoryOf(pid: number): Promise<{ peak: number; now: number }> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)![1]) * 1024;
  return { peak: kib('VmHWM'), now: kib('VmRSS') };
}
