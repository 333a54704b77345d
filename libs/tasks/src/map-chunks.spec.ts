import { ChunkTooLargeError, chunkCount, chunkOf, type MapChunk, MapChunker } from './map-chunks.js';

function cut(inputs: unknown[], size: number, maxBytes?: number): MapChunk[] {
  const chunker = new MapChunker(size, maxBytes);
  const out: MapChunk[] = [];
  for (const input of inputs) {
    const closed = chunker.add(input);
    if (closed) out.push(closed);
  }
  const last = chunker.finish();
  if (last) out.push(last);
  return out;
}

describe('map chunks', () => {
  const seven = Array.from({ length: 7 }, (_, x) => ({ x }));

  it('cuts inputs into chunks of chunk_size in input order, the last one partial', () => {
    expect(cut(seven, 3).map((c) => [c.chunk, c.firstIndex, c.inputs])).toEqual([
      [0, 0, seven.slice(0, 3)],
      [1, 3, seven.slice(3, 6)],
      [2, 6, seven.slice(6)],
    ]);
  });

  it('makes one chunk per input at chunk_size 1, and none of no input', () => {
    expect(cut(seven, 1).map((c) => c.firstIndex)).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(cut([], 4)).toEqual([]);
  });

  it('leaves no partial chunk when the inputs fill the last one', () => {
    expect(cut(seven.slice(0, 6), 3).map((c) => c.inputs.length)).toEqual([3, 3]);
  });

  it('counts every input and the bytes of each chunk (JSON and a separator each)', () => {
    const chunker = new MapChunker(2);
    expect(chunker.add({ x: 1 })).toBeUndefined();
    expect(chunker.add('é')?.bytes).toBe('{"x":1}'.length + 1 + Buffer.byteLength('"é"') + 1);
    expect(chunker.total).toBe(2);
  });

  it('refuses a chunk over the payload limit, naming it and its first input', () => {
    expect(() => cut(seven, 3, 20)).toThrow(new ChunkTooLargeError(0, 0, 20));
    const big = [...seven.slice(0, 3), { x: 'y'.repeat(50) }];
    expect(() => cut(big, 3, 40)).toThrow('chunk 1 (inputs from 3) is over the 0.0390625 KiB task payload limit: lower chunk_size');
    expect(() => cut(seven, 3, 1024)).not.toThrow();
  });

  it('refuses a chunk size that is not a whole number from 1', () => {
    for (const size of [0, -1, 1.5]) expect(() => new MapChunker(size)).toThrow('chunk_size must be a whole number from 1');
  });

  it('counts chunks and finds the chunk of an input', () => {
    expect([0, 1, 3, 4, 7].map((total) => chunkCount(total, 3))).toEqual([0, 1, 1, 2, 3]);
    expect([0, 2, 3, 6].map((i) => chunkOf(i, 3))).toEqual([0, 0, 1, 2]);
  });
});
