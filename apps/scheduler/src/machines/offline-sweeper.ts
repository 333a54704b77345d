import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { MachinesRepository } from '#tern/persistence';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { Ticker } from '#tern/timing';
import { MachineStateRelay } from './machine-state-relay.js';

/**
 * Moves machines silent for longer than the heartbeat TTL offline (MachinesRepository's
 * markOfflineOlderThan: each machine once, whatever the number of scheduler replicas); the same
 * statement writes each move to the outbox, which the relay announces once it has committed.
 */
@Injectable()
export class OfflineSweeper implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('offline-sweeper');
  private ticker?: Ticker;

  constructor(
    private readonly machines: MachinesRepository,
    private readonly relay: MachineStateRelay,
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

  /** Moves silent machines offline; returns how many moved. */
  async sweep(): Promise<number> {
    const swept = await this.machines.markOfflineOlderThan(this.config.machines.heartbeatTtlSeconds);
    if (swept.length) this.relay.poke();
    for (const m of swept) this.logger.warn({ machineId: m.id, from: m.from, reason: m.reason }, `machine ${m.id}: ${m.from} → offline`);
    return swept.length;
  }
}
