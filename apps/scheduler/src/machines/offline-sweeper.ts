import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { MachinesRepository } from '#tern/persistence';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { MachineTransitions } from './machine-transitions.js';
import { mapLimit, Ticker } from '#tern/timing';

/** Publishes of one sweep in flight at once (a sweep takes up to 500 machines). */
const ANNOUNCE_CONCURRENCY = 32;

/**
 * Moves machines silent for longer than the heartbeat TTL offline (MachinesRepository's
 * markOfflineOlderThan: each machine once, whatever the number of scheduler replicas) and
 * announces each move before the move commits.
 */
@Injectable()
export class OfflineSweeper implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('offline-sweeper');
  private ticker?: Ticker;

  constructor(
    private readonly machines: MachinesRepository,
    private readonly transitions: MachineTransitions,
    @Inject(TERN_CONFIG) private readonly config: TernConfig,
  ) {}

  onApplicationBootstrap() {
    // At most half a TTL late, and at least every second so a short TTL is honoured closely.
    const everyMs = Math.min(1000, (this.config.machines.heartbeatTtlSeconds * 1000) / 2);
    this.ticker = new Ticker({ name: 'offline sweep', everyMs, logger: this.logger }, () => this.sweep()).start();
  }

  async onModuleDestroy() {
    await this.ticker?.stop();
  }

  /** Moves silent machines offline and announces each move; returns how many moved. */
  async sweep(): Promise<number> {
    return this.machines.transaction(async (tx) => {
      const swept = await tx.markOfflineOlderThan(this.config.machines.heartbeatTtlSeconds);
      // Announced concurrently: the swept rows stay locked until the last ack, and heartbeats of
      // those machines wait on the locks (bench/agents: one by one, 500 acks under load stalled them all).
      await mapLimit(swept, ANNOUNCE_CONCURRENCY, async (m) => {
        await this.transitions.announce({
          machineId: m.id,
          pool: m.pool,
          from: m.from,
          to: 'offline',
          reason: m.reason,
          changedAt: m.changedAt,
        });
        this.logger.warn({ machineId: m.id, from: m.from, reason: m.reason }, `machine ${m.id}: ${m.from} → offline`);
      });
      return swept.length;
    });
  }
}
