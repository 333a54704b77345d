import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { alignedBuffers, DIRECT_ALIGN, openBlobFile, readAt, writeAt } from './direct-io.js';
import { sha256Of } from './sha256-threads.js';

/** Bytes of `path` held in the page cache (util-linux fincore). */
function cachedBytes(path: string): number {
  return Number(execFileSync('fincore', ['--bytes', '--noheadings', '--raw', '--output', 'RES', path], { encoding: 'utf8' }).trim());
}

describe('direct I/O of blob files', () => {
  let dir: string;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tern-direct-io-spec-'));
  });

  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('writes and reads a file of unaligned size through aligned buffers, its bytes never in the page cache', async () => {
    const [one, two] = alignedBuffers(2 ** 20, 2) as [Buffer, Buffer];
    // Shared memory: the sha256 threads read the buffers where they lie.
    expect(one.buffer).toBeInstanceOf(SharedArrayBuffer);
    const size = 2 ** 20 + 5 * DIRECT_ALIGN + 123;
    const bytes = randomBytes(size);
    const path = join(dir, 'blob');
    const blob = await openBlobFile(path, 'w+');
    // This host's filesystem takes direct I/O (a test machine whose does not fails here).
    expect(blob.direct).toBe(true);
    // A first piece of whole blocks, then the rest, its end padded to a block and cut off.
    bytes.copy(one, 0, 0, 2 ** 20);
    await writeAt(blob, one, 0);
    bytes.copy(two, 0, 2 ** 20);
    await writeAt(blob, two.subarray(0, size - 2 ** 20), 2 ** 20);
    await blob.file.truncate(size);
    await blob.file.close();
    expect((await stat(path)).size).toBe(size);
    expect(cachedBytes(path)).toBe(0);

    const kept = await openBlobFile(path, 'r');
    try {
      const [into] = alignedBuffers(2 ** 20 + DIRECT_ALIGN, 1) as [Buffer];
      for (const [position, length] of [
        [0, 2 ** 20],
        [1, 100],
        [DIRECT_ALIGN - 1, 2],
        [2 ** 20 - 7, 2 ** 20],
        [size - 10, 100],
        [size, 10],
      ] as const) {
        const got = await readAt(kept, into, position, length);
        expect(got.equals(bytes.subarray(position, Math.min(size, position + length)))).toBe(true);
      }
      expect(await sha256Of(await readAt(kept, into, 0, 2 ** 20))).toBe(
        createHash('sha256')
          .update(bytes.subarray(0, 2 ** 20))
          .digest('hex'),
      );
      await expect(readAt(kept, into.subarray(0, 2 ** 20), 5, 2 ** 20)).rejects.toThrow(RangeError);
    } finally {
      await kept.file.close();
    }
    expect(cachedBytes(path)).toBe(0);
    expect((await readFile(path)).equals(bytes)).toBe(true);
  });
});
