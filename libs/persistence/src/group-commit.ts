/**
 * Group commit: writes handed in while one is in flight wait and go together in the next
 * statement. An idle caller's write goes at once (after the I/O already read in this turn of the
 * event loop, which joins it); under load one statement carries many, so the count of round trips
 * falls as the load rises instead of growing with it. Each caller gets its own answer.
 *
 * A batch that fails is written again one by one, so one bad item fails only its own caller.
 */
export class GroupCommit<I, O> {
  private queue: { item: I; resolve: (o: O) => void; reject: (e: unknown) => void }[] = [];
  private writing = false;

  /**
   * @param write writes the items in one statement and answers one outcome per item, in order.
   * @param maxBatch the most items one statement carries.
   */
  constructor(
    private readonly write: (items: I[]) => Promise<O[]>,
    private readonly maxBatch = 256,
  ) {}

  /** Resolves with the item's outcome once the statement carrying it is done. */
  add(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      if (this.writing) return;
      this.writing = true;
      // drain() settles every caller's promise itself and never rejects.
      setImmediate(() => {
        this.drain().catch(() => undefined);
      });
    });
  }

  private async drain(): Promise<void> {
    while (this.queue.length) {
      const batch = this.queue.splice(0, this.maxBatch);
      try {
        const outcomes = await this.write(batch.map((b) => b.item));
        batch.forEach((b, i) => b.resolve(outcomes[i]));
      } catch (e) {
        if (batch.length === 1) batch[0].reject(e);
        else await Promise.all(batch.map((b) => this.write([b.item]).then(([o]) => b.resolve(o), b.reject)));
      }
    }
    this.writing = false;
  }
}
