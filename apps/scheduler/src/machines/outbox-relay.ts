import { Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { Ticker } from '#tern/timing';

/** Rows left by a scheduler that died before announcing them wait at most this long. */
export const RELAY_EVERY_MS = 1_000;

/**
 * The loop of the scheduler's outbox relays: rounds of claim, publish, delete (each round one
 * transaction, see `round`) until the outbox is empty, a publish failed (the rest waits for the
 * next run) or the process is stopping. Poked after each commit that wrote to the outbox; a ticker
 * catches the rest (another replica's rows, a dead process's).
 */
export abstract class OutboxRelay implements OnApplicationBootstrap, OnApplicationShutdown {
  protected readonly logger: Logger;
  private readonly ticker: Ticker;

  /** `name`: what the relay announces, e.g. "machine state relay". */
  protected constructor(
    name: string,
    private readonly roundSize: number,
  ) {
    this.logger = new Logger(name.replaceAll(' ', '-'));
    this.ticker = new Ticker({ name, everyMs: RELAY_EVERY_MS, logger: this.logger, immediate: true }, () => this.run());
  }

  onApplicationBootstrap() {
    this.ticker.start();
  }

  async onApplicationShutdown() {
    await this.ticker.stop();
  }

  /** Announce what has just been committed (now, or right after the round in progress). */
  poke(): void {
    this.ticker.poke();
  }

  /** Publishes the outbox until it is empty or the rest is not this relay's to publish now; returns how many were announced. */
  async run(): Promise<number> {
    let announced = 0;
    for (;;) {
      const round = await this.round(this.roundSize);
      announced += round.published;
      if (round.read < this.roundSize || round.published < round.read || this.ticker.stopping) return announced;
    }
  }

  /** In one transaction: claims up to `limit` rows, publishes them, deletes those published. */
  protected abstract round(limit: number): Promise<{ read: number; published: number }>;
}
