import { Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { STREAMS } from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import { Ticker } from '#tern/timing';
import { TaskTransitions } from './task-transitions.js';

export const SWEEP_EVERY_MS = 2_000;

/**
 * The sweeper of pending tasks past their ttl: they become EXPIRED (each row claimed by one
 * replica, SKIP LOCKED, so none is expired twice) and their TASKS messages are deleted, so no
 * agent picks them up.
 */
@Injectable()
export class TaskExpiry implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('task-expiry');
  private readonly ticker = new Ticker({ name: 'task expiry', everyMs: SWEEP_EVERY_MS, logger: this.logger }, () => this.run());

  constructor(
    private readonly messaging: Messaging,
    private readonly transitions: TaskTransitions,
  ) {}

  onApplicationBootstrap() {
    this.ticker.start();
  }

  async onApplicationShutdown() {
    await this.ticker.stop();
  }

  async run(): Promise<void> {
    const expired = await this.transitions.expire();
    if (!expired.length) return;
    const jsm = await this.messaging.jsm();
    for (const t of expired) {
      if (t.streamSeq !== null)
        await jsm.streams.deleteMessage(this.messaging.ns.stream(STREAMS.TASKS.name), t.streamSeq, false).catch(() => undefined);
    }
    this.logger.log(`${expired.length} task(s) expired before starting`);
  }
}
