/**
 * Sizes of bursts of events (each within `gapMs` of the one before), remembered for
 * `memoryMs`: how many containers a scale-out started at once, so the next one finds as many
 * network namespaces made ahead.
 */
export class BurstTracker {
  private last = -Infinity;
  private size = 0;
  private bursts: { at: number; size: number }[] = [];

  constructor(
    private readonly gapMs: number,
    private readonly memoryMs: number,
  ) {}

  note(now: number): void {
    this.size = now - this.last <= this.gapMs ? this.size + 1 : 1;
    this.last = now;
    this.bursts = this.bursts.filter((b) => now - b.at <= this.memoryMs);
    this.bursts.push({ at: now, size: this.size });
  }

  /** The largest burst seen within the memory (0 when none). */
  peak(now: number): number {
    let peak = 0;
    for (const b of this.bursts) if (now - b.at <= this.memoryMs && b.size > peak) peak = b.size;
    return peak;
  }
}
