/**
 * Group commit: writes handed in while one is in flight wait and go together in the next
 * statement. An idle caller's write goes at once (after the I/O already read in this turn of the
 * event loop, which joins it); under load one statement carries many, so the count of round trips
 * falls as the load rises instead of growing with it. Each caller gets its own answer.
 *
 * A batch that fails is written again one by one, so one bad item fails only its own caller.
 * Items with the same key never share a statement (an UPDATE … FROM changes a row once, whatever
 * the count of items naming it): a later one waits for the next statement, in the order given.
 */
export class GroupCommit<I, O> {
  private queue: { item: I; resolve: (o: O) => void; reject: (e: unknown) => void }[] = [];
  private writing = false;

  private readonly maxBatch: number;
  private readonly keyOf?: (item: I) => string;
  private readonly lingerMs: number;

  /**
   * @param write writes the items in one statement and answers one outcome per item, in order.
   * @param options.maxBatch the most items one statement carries (256).
   * @param options.keyOf what an item changes (a row's id): items with the same key go in separate statements.
   * @param options.lingerMs how long an idle caller's write waits for others before it goes: 0 (the
   *   default) for writes someone waits on; more for writes nobody waits on that would otherwise
   *   compete with the ones someone does (and lock their rows) at the moment they are made.
   */
  constructor(
    private readonly write: (items: I[]) => Promise<O[]>,
    options: { maxBatch?: number; keyOf?: (item: I) => string; lingerMs?: number } = {},
  ) {
    this.maxBatch = options.maxBatch ?? 256;
    this.keyOf = options.keyOf;
    this.lingerMs = options.lingerMs ?? 0;
  }

  /** Resolves with the item's outcome once the statement carrying it is done. */
  add(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      if (this.writing) return;
      this.writing = true;
      // drain() settles every caller's promise itself and never rejects.
      const drain = () => {
        this.drain().catch(() => undefined);
      };
      if (this.lingerMs > 0) setTimeout(drain, this.lingerMs);
      else setImmediate(drain);
    });
  }

  private async drain(): Promise<void> {
    while (this.queue.length) {
      const batch = this.nextBatch();
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

  /** Up to maxBatch items from the front of the queue, no two with the same key. */
  private nextBatch() {
    const keyOf = this.keyOf;
    if (!keyOf) return this.queue.splice(0, this.maxBatch);
    const keys = new Set<string>();
    const batch: typeof this.queue = [];
    const rest: typeof this.queue = [];
    for (const queued of this.queue) {
      const key = keyOf(queued.item);
      if (batch.length < this.maxBatch && !keys.has(key)) {
        keys.add(key);
        batch.push(queued);
      } else rest.push(queued);
    }
    this.queue = rest;
    return batch;
  }
}
