import { sharedBuffer } from './sha256-threads.js';

/**
 * Buffers of one size, reused: a fresh large buffer per piece of a stream is external memory,
 * and enough of it has the garbage collector run a full collection every few MiB. `most` bounds
 * the buffers out at once (a taker finding none waits, `whenFree`); `keep` bounds those kept
 * idle between uses.
 */
export class BufferPool {
  private readonly free: Buffer[] = [];
  private readonly waiting = new Set<() => void>();
  private out = 0;

  constructor(
    readonly size: number,
    private readonly options: { most: number; keep: number; shared?: boolean },
  ) {}

  /** A buffer of `size` bytes, or undefined while `most` are out. */
  take(): Buffer | undefined {
    if (this.out >= this.options.most) return undefined;
    this.out++;
    return this.free.pop() ?? (this.options.shared ? sharedBuffer(this.size) : Buffer.allocUnsafeSlow(this.size));
  }

  /**
   * A buffer taken is free again (`reuse` false: it may still be read or written by what it was
   * lent to, so it is dropped rather than kept); those waiting for one hear of it.
   */
  give(buffer: Buffer, reuse = true): void {
    this.out--;
    if (reuse && this.free.length < this.options.keep) this.free.push(buffer);
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
}
