import { TASK_PAYLOAD_MAX_BYTES } from '#tern/contracts';

/** A map's inputs cut into chunks: chunk k holds inputs k·size … k·size + size − 1, and becomes one task. */
export interface MapChunk {
  /** 0 for the first. */
  chunk: number;
  /** The index of its first input in the map. */
  firstIndex: number;
  inputs: unknown[];
  /** The size of its task payload's inputs as JSON, a separator per input included. */
  bytes: number;
}

/** A chunk whose inputs would not fit in one task's payload: the map is refused, its chunk_size too large. */
export class ChunkTooLargeError extends Error {
  constructor(
    readonly chunk: number,
    readonly firstIndex: number,
    readonly maxBytes: number,
  ) {
    super(`chunk ${chunk} (inputs from ${firstIndex}) is over the ${maxBytes / 1024} KiB task payload limit: lower chunk_size`);
    this.name = 'ChunkTooLargeError';
  }
}

/** How many chunks `total` inputs make. */
export function chunkCount(total: number, chunkSize: number): number {
  return Math.ceil(total / chunkSize);
}

/** The chunk holding input `index`. */
export function chunkOf(index: number, chunkSize: number): number {
  return Math.floor(index / chunkSize);
}

/**
 * Cuts a stream of inputs into chunks as they arrive, one open chunk in memory: add() answers
 * the chunk an input closed, finish() the last, partial one. Throws ChunkTooLargeError when a
 * chunk it closes is over the task payload limit.
 */
export class MapChunker {
  private open: unknown[] = [];
  private openBytes = 0;
  private seen = 0;

  constructor(
    private readonly chunkSize: number,
    private readonly maxBytes: number = TASK_PAYLOAD_MAX_BYTES,
  ) {
    if (!Number.isInteger(chunkSize) || chunkSize < 1) throw new RangeError(`chunk_size must be a whole number from 1, not ${chunkSize}`);
  }

  /** How many inputs were added. */
  get total(): number {
    return this.seen;
  }

  add(input: unknown): MapChunk | undefined {
    this.open.push(input);
    this.openBytes += Buffer.byteLength(JSON.stringify(input)) + 1;
    this.seen++;
    return this.open.length === this.chunkSize ? this.close() : undefined;
  }

  finish(): MapChunk | undefined {
    return this.open.length ? this.close() : undefined;
  }

  private close(): MapChunk {
    const firstIndex = this.seen - this.open.length;
    const chunk = chunkOf(firstIndex, this.chunkSize);
    if (this.openBytes > this.maxBytes) throw new ChunkTooLargeError(chunk, firstIndex, this.maxBytes);
    const closed = { chunk, firstIndex, inputs: this.open, bytes: this.openBytes };
    this.open = [];
    this.openBytes = 0;
    return closed;
  }
}
