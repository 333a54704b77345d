import { createHash, randomBytes } from 'node:crypto';
import { sha256Of, sharedBuffer } from './sha256-threads.js';

const sha256 = (data: Uint8Array) => createHash('sha256').update(data).digest('hex');

describe('sha256Of', () => {
  it('hashes views of shared memory on its threads, each its own bytes, many at once', async () => {
    const memory = sharedBuffer(8 * 2 ** 20);
    randomBytes(memory.length).copy(memory);
    const views = Array.from({ length: 24 }, (_, i) => memory.subarray(i * 300_000 + i, i * 300_000 + i + 1_000_000 - i * 7));
    expect(views[0]!.buffer).toBeInstanceOf(SharedArrayBuffer);
    expect(await Promise.all(views.map((v) => sha256Of(v)))).toEqual(views.map((v) => sha256(v)));
    expect(await sha256Of(memory.subarray(0, 0))).toBe(sha256(Buffer.alloc(0)));
  });

  it('hashes other buffers too', async () => {
    const bytes = randomBytes(3 * 2 ** 20 + 5);
    expect(await sha256Of(bytes.subarray(5))).toBe(sha256(bytes.subarray(5)));
  });
});
