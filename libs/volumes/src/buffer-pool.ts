import { alignedBuffers } from './direct-io.js';
import { sharedBuffer } from './sha256-threads.js';

/** Aligned buffers are made this many at a time, over one memory. */
const ALIGNED_AT_ONCE = 16;

/**
 * Buffers of one size, reused: a fresh large buffer per piece of a stream is external memory,
 * and enough of it has the garbage collector run a full collection every few MiB. `most` bounds
 * the buffers out at once (a taker finding none waits, `whenFree`); `keep` bounds those kept
 * idle between uses. `aligned` buffers (for direct I/O, over shared memory: `alignedBuffers`)
 * are made several at a time over one memory that is never given back, so all of them are kept.
 */
export class BufferPool {
  private readonly free: Buffer[] = [];
  private readonly waiting = new Set<() => void>();
  private unused: Buffer[] = [];
  private made = 0;
  private out = 0;

  constructor(
    readonly size: number,
    private readonly options: { most: number; keep: number; shared?: boolean; aligned?: boolean },
  ) {}

  /** A buffer of `size` bytes, or undefined while `most` are out. */
  take(): Buffer | undefined {
    if (this.out >= this.options.most) return undefined;
    this.out++;
    return this.free.pop() ?? this.make();
  }

  /** A buffer taken is free again (nothing reads or writes it any more); those waiting for one hear of it. */
  give(buffer: Buffer): void {
    this.out--;
    if (this.options.aligned || this.free.length < this.options.keep) this.free.push(buffer);
    const waiting = [...this.waiting];
    this.waiting.clear();
    // Each tries to take one; those that find none ask again.
    for (const wake of waiting) wake();
  }

  /** Calls `wake` once, when a buffer is given back (at once if one may be taken now). */
  whenFree(wake: () => void): void {
    if (this.out < this.options.most) queueMicrotask(wake);
    else this.waiting.add(wake);
  }

  private make(): Buffer {
    if (!this.options.aligned) return this.options.shared ? sharedBuffer(this.size) : Buffer.allocUnsafeSlow(this.size);
    if (!this.unused.length) {
      const count = Math.max(1, Math.min(ALIGNED_AT_ONCE, this.options.most - this.made));
      this.unused = alignedBuffers(this.size, count);
      this.made += count;
    }
    return this.unused.pop()!;
  }
}
