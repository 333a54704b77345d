/**
 * An async iterable fed by a NATS subscription callback: chunks queue until read, an end or
 * an error is delivered after the chunks before it. Leaving the loop early calls onClose so
 * the caller can drop its subscription.
 */
export class ChunkQueue implements AsyncIterable<Uint8Array> {
  private readonly chunks: Uint8Array[] = [];
  private done = false;
  private error?: Error;
  private wake?: () => void;

  constructor(private readonly onClose: () => void) {}

  push(chunk: Uint8Array): void {
    if (this.done) return;
    this.chunks.push(chunk);
    this.wake?.();
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
