import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { checkpointSlices, type UsageSlice } from '#tern/metering';
import { type MeteredContainerState, UsageRepository } from '#tern/persistence';
import { meteringCheckpointsTotal } from '../metering-metrics.js';
import { type Allotment, allotmentOf, countAccrued, upsertSlices } from './slice-rows.js';
import { Ticker } from '#tern/timing';

/** Containers accrued per transaction: bounds the statement size (13 parameters per slice). */
const BATCH = 500;

/**
 * Every METERING_CHECKPOINT_INTERVAL_MS, writes the usage of every running container up to
 * now (the database's clock, shared by all replicas), so usage is current and a crash of
 * metering loses nothing that the next checkpoint would not write again. Rows are claimed
 * skipping locked ones (UsageRepository.claimRunning): a container whose event is being
 * applied right now, or that another replica is accruing, waits for the next tick, and a
 * checkpoint can never overwrite the final slices a stop has just written.
 */
@Injectable()
export class Checkpointer implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('checkpointer');
  private ticker?: Ticker;

  constructor(
    private readonly usage: UsageRepository,
    @Inject(TERN_CONFIG) private readonly config: TernConfig,
  ) {}

  onApplicationBootstrap() {
    const everyMs = this.config.metering.checkpointIntervalMs;
    this.ticker = new Ticker({ name: 'checkpoint', everyMs, logger: this.logger }, () => this.checkpoint()).start();
  }

  async onModuleDestroy() {
    await this.ticker?.stop();
  }

  /** Accrues every running container to now; returns how many it accrued. */
  async checkpoint(): Promise<number> {
    let total = 0;
    let after = '';
    for (;;) {
      const done = await this.usage.transaction(async (tx) => {
        const claimed = await tx.claimRunning(after, BATCH);
        const rows = claimed.containers;
        if (!rows.length || !claimed.now) return 0;
        const now = claimed.now.getTime();
        const entries: { row: MeteredContainerState; allotment: Allotment; slice: UsageSlice }[] = [];
        for (const row of rows) {
          const allotment = allotmentOf(row)!;
          const startedAt = row.startedAt!.getTime();
          const accruedTo = row.accruedTo?.getTime() ?? null;
          for (const slice of checkpointSlices(startedAt, accruedTo, now)) entries.push({ row, allotment, slice });
          countAccrued((now - Math.max(startedAt, accruedTo ?? startedAt)) / 1000, allotment);
        }
        await upsertSlices(tx, entries, false);
        await tx.advanceAccruedTo(
          rows.map((r) => r.containerId),
          new Date(now),
        );
        after = rows[rows.length - 1].containerId;
        return rows.length;
      });
      total += done;
      if (done < BATCH) break;
    }
    meteringCheckpointsTotal.inc();
    return total;
  }
}
