/**
 * Calls `fn` at most once per gapMs: the first call after a quiet spell at once, the calls that
 * follow within the gap folded into one at its end. For wake-ups that a burst of events sets off
 * (a deployment's containers stopping one after another), so the burst costs two runs, not one each.
 */
export class Throttle {
  private last = -Infinity;
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly gapMs: number,
    private readonly fn: () => void,
  ) {}

  call(): void {
    if (this.timer) return;
    const wait = this.last + this.gapMs - Date.now();
    if (wait <= 0) return this.fire();
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.fire();
    }, wait);
  }

  /** Drops a call waiting for the end of its gap. */
  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private fire(): void {
    this.last = Date.now();
    this.fn();
  }
}
