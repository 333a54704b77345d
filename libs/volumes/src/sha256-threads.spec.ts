import { createHash, randomBytes } from 'node:crypto';
import { sha256Of, sha256Stream, sharedBuffer } from './sha256-threads.js';

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

  it('hashes streams piece by piece through one reused buffer, many at once, and tells changed bytes apart', async () => {
    const blobs = Array.from({ length: 6 }, (_, i) => randomBytes(3 * 2 ** 20 + i * 1001));
    const changed = Buffer.from(blobs[0]!);
    changed[2 ** 20 + 5]! ^= 1;
    const pieceBytes = 2 ** 20 - 3;
    /** Each blob through its own shared buffer, refilled once the thread has read the piece before. */
    const streamed = (blob: Buffer) => {
      const stream = sha256Stream();
      const buffer = sharedBuffer(pieceBytes);
      return (async () => {
        for (let at = 0; at < blob.length; at += pieceBytes) {
          const n = blob.copy(buffer, 0, at, at + pieceBytes);
          await stream.update(buffer.subarray(0, n));
        }
        return stream.digest();
      })();
    };
    const digests = await Promise.all([...blobs, changed].map(streamed));
    expect(digests).toEqual([...blobs, changed].map((b) => sha256(b)));
    expect(digests[0]).not.toBe(digests.at(-1));
    expect(await sha256Stream().digest()).toBe(sha256(Buffer.alloc(0)));
    await expect(sha256Stream().update(randomBytes(10))).rejects.toThrow('views of shared memory only');
  });
});

describe('sha256Stream', () => {
  it('hashes pieces in the order given, several streams at once, each its own', async () => {
    const data = [randomBytes(5 * 2 ** 20 + 3), randomBytes(2 ** 20), randomBytes(7)];
    const streams = data.map(() => sha256Stream());
    const memory = sharedBuffer(2 ** 20);
    for (let at = 0; at < data[0]!.length; at += 2 ** 20 - 1) {
      // One buffer reused for every piece: each update has read its bytes once it settles.
      for (const [i, bytes] of data.entries()) {
        const piece = bytes.subarray(at, at + 2 ** 20 - 1);
        if (!piece.length) continue;
        piece.copy(memory);
        await streams[i]!.update(memory.subarray(0, piece.length));
      }
    }
    expect(await Promise.all(streams.map((s) => s.digest()))).toEqual(data.map((d) => sha256(d)));
    expect(await sha256Stream().digest()).toBe(sha256(Buffer.alloc(0)));
  });

  it('refuses memory that is not shared', async () => {
    const stream = sha256Stream();
    await expect(stream.update(randomBytes(10))).rejects.toThrow(/shared memory only/);
    await stream.digest();
  });
});
