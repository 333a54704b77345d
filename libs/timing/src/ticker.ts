/** Where a failed tick is reported; a Nest Logger or a pino logger fits. */
export interface TickLogger {
  warn(message: string): unknown;
}

export interface TickerOptions {
  /** Named in the log line of a failed tick. */
  name: string;
  everyMs: number;
  logger: TickLogger;
  /** Run the first tick at once instead of after everyMs. */
  immediate?: boolean;
  /** Let the process exit while this is the only timer left (a UI redraw, a report). */
  unref?: boolean;
}

/**
 * The one periodic loop of the codebase: runs `tick` every everyMs, never two at a time (a
 * tick still running when the next is due makes that one skip), logs a failed tick instead of
 * throwing it, and `stop()` resolves only after the running tick has finished, so a service
 * shutting down never closes its connections under a tick. `poke()` runs a tick now (or right
 * after the running one) for work that should not wait for the period.
 */
export class Ticker {
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private again = false;
  private stopped = false;

  constructor(
    private readonly options: TickerOptions,
    private readonly tick: () => Promise<unknown> | unknown,
  ) {}

  start(): this {
    this.stopped = false;
    this.timer = setInterval(() => this.run(), this.options.everyMs);
    if (this.options.unref) this.timer.unref();
    if (this.options.immediate) this.run();
    return this;
  }

  /** Runs a tick now, or once more right after the one running. */
  poke(): void {
    if (this.stopped) return;
    if (this.running) this.again = true;
    else this.run();
  }

  /** stop() has been called: a long tick may end early. */
  get stopping(): boolean {
    return this.stopped;
  }

  /** The tick in progress, if any: for callers that must see its effects. */
  get current(): Promise<void> | undefined {
    return this.running;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }

  private run(): void {
    if (this.running || this.stopped) return;
    // Cleared in a continuation, never synchronously: a tick that throws at once must not clear
    // the field before it has been set.
    this.running = this.loop().then(() => {
      this.running = undefined;
    });
  }

  private async loop(): Promise<void> {
    do {
      this.again = false;
      try {
        await this.tick();
      } catch (error) {
        this.options.logger.warn(`${this.options.name} failed: ${error instanceof Error ? error.message : String(error)}`);
      }
    } while (this.again && !this.stopped);
  }
}
