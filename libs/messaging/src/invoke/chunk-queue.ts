/** Back-pressure for a producer that can pause (a socket): how much may wait, and how to go on. */
export interface ChunkFlow {
  highWaterBytes: number;
  resume: () => void;
}

/**
 * An async iterable fed by a callback (a NATS subscription, an HTTP parser): chunks queue until
 * read, an end or an error is delivered after the chunks before it. Leaving the loop (early or
 * not) calls onClose so the caller can drop its subscription. With a `flow`, push answers false
 * once more than its high-water mark waits, and `flow.resume` is called when the reader has
 * taken the queue back under it.
 */
export class ChunkQueue implements AsyncIterable<Uint8Array> {
  private readonly chunks: Uint8Array[] = [];
  private done = false;
  private error?: Error;
  private wake?: () => void;
  private waitingBytes = 0;
  private paused = false;

  constructor(
    private readonly onClose: () => void,
    private readonly flow?: ChunkFlow,
  ) {}

  /** False: the producer should pause until `flow.resume` (never without a flow). */
  push(chunk: Uint8Array): boolean {
    if (this.done) return true;
    this.chunks.push(chunk);
    this.wake?.();
    if (!this.flow) return true;
    this.waitingBytes += chunk.length;
    this.paused = this.waitingBytes > this.flow.highWaterBytes;
    return !this.paused;
  }

  end(): void {
    this.done = true;
    this.wake?.();
  }

  fail(error: Error): void {
    if (this.done) return;
    this.error = error;
    this.done = true;
    this.wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Uint8Array> {
    try {
      for (;;) {
        const next = this.chunks.shift();
        if (next) {
          if (this.flow) {
            this.waitingBytes -= next.length;
            if (this.paused && this.waitingBytes <= this.flow.highWaterBytes) {
              this.paused = false;
              this.flow.resume();
            }
          }
          yield next;
          continue;
        }
        if (this.error) throw this.error;
        if (this.done) return;
        await new Promise<void>((resolve) => (this.wake = resolve));
        this.wake = undefined;
      }
    } finally {
      this.onClose();
    }
  }
}
