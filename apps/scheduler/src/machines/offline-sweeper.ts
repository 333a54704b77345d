import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { MACHINE_BEAT } from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import { MachinesRepository, OFFLINE_SWEEP_BATCH } from '#tern/persistence';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { Ticker } from '#tern/timing';
import { MachineStateRelay } from './machine-state-relay.js';

/**
 * Moves machines silent for longer than the heartbeat TTL offline (MachinesRepository's
 * markOfflineOlderThan: each machine once, whatever the number of scheduler replicas); the same
 * statement writes each move to the outbox, which the relay announces once it has committed.
 *
 * Beats are core NATS: one sent while this replica was not hearing them (not yet started, or cut
 * from NATS) is lost, not late. So a replica sweeps only once it has heard beats for a whole TTL
 * without a break: every live machine has beaten since, and a silence longer than the TTL is the
 * machine's, not this scheduler's downtime (another replica, hearing all along, sweeps meanwhile).
 */
@Injectable()
export class OfflineSweeper implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('offline-sweeper');
  private ticker?: Ticker;

  constructor(
    private readonly machines: MachinesRepository,
    private readonly relay: MachineStateRelay,
    private readonly messaging: Messaging,
    @Inject(TERN_CONFIG) private readonly config: TernConfig,
  ) {}

  onApplicationBootstrap() {
    // At most a sixth of a TTL late (5 s of the default 30). Not every second: each sweep reads
    // every live machine's row (no index on the beat's time, so beats are HOT updates), 59 ms of
    // Postgres a sweep at 10,000 machines (bench/agents README, run Z).
    const everyMs = Math.min(5000, (this.config.machines.heartbeatTtlSeconds * 1000) / 6);
    this.ticker = new Ticker({ name: 'offline sweep', everyMs, logger: this.logger }, () => this.sweep()).start();
  }

  async onModuleDestroy() {
    await this.ticker?.stop();
  }

  /** Whether this replica has heard beats for a whole TTL without a break, so a silence it sees is the machines'. */
  hearsLongEnough(now = Date.now()): boolean {
    const since = this.messaging.hearing(MACHINE_BEAT).unbrokenSince;
    return since !== undefined && now - since >= this.config.machines.heartbeatTtlSeconds * 1000;
  }

  /**
   * Moves silent machines offline, a batch after another while batches come full (a site's
   * thousands at once); returns how many moved (none while this replica has not heard a whole TTL).
   */
  async sweep(): Promise<number> {
    if (!this.hearsLongEnough()) return 0;
    let moved = 0;
    for (;;) {
      const swept = await this.machines.markOfflineOlderThan(this.config.machines.heartbeatTtlSeconds);
      if (swept.length) this.relay.poke();
      for (const m of swept) this.logger.warn({ machineId: m.id, from: m.from, reason: m.reason }, `machine ${m.id}: ${m.from} → offline`);
      moved += swept.length;
      if (swept.length < OFFLINE_SWEEP_BATCH) return moved;
    }
  }
}
