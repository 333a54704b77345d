import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { checkpointSlices, type UsageSlice } from '#tern/metering';
import { queryRows } from '#tern/persistence';
import { meteringCheckpointsTotal } from '../metering-metrics.js';
import { type Allotment, allotmentOf, type ContainerRow, countAccrued, upsertSlices } from './slice-rows.js';

/** Containers accrued per transaction: bounds the statement size (13 parameters per slice). */
const BATCH = 500;

/**
 * Every METERING_CHECKPOINT_INTERVAL_MS, writes the usage of every running container up to
 * now (the database's clock, shared by all replicas), so usage is current and a crash of
 * metering loses nothing that the next checkpoint would not write again. Rows are claimed
 * with FOR UPDATE SKIP LOCKED: a container whose event is being applied right now, or that
 * another replica is accruing, waits for the next tick, and a checkpoint can never overwrite
 * the final slices a stop has just written.
 */
@Injectable()
export class Checkpointer implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('checkpointer');
  private timer?: NodeJS.Timeout;
  private running?: Promise<unknown>;

  constructor(
    private readonly dataSource: DataSource,
    @Inject(TERN_CONFIG) private readonly config: TernConfig,
  ) {}

  onApplicationBootstrap() {
    this.timer = setInterval(() => this.tick(), this.config.metering.checkpointIntervalMs);
  }

  async onModuleDestroy() {
    clearInterval(this.timer);
    await this.running;
  }

  private tick() {
    if (this.running) return;
    this.running = this.checkpoint()
      .catch((e: unknown) => this.logger.warn(`checkpoint failed (${(e as Error).message}); retrying on the next tick`))
      .finally(() => (this.running = undefined));
  }

  /** Accrues every running container to now; returns how many it accrued. */
  async checkpoint(): Promise<number> {
    let total = 0;
    let after = '';
    for (;;) {
      const done = await this.dataSource.transaction(async (m) => {
        const runner = m.queryRunner!;
        const rows = await queryRows<ContainerRow & { now: Date }>(
          runner,
          `SELECT container_id, workspace_id, deployment_id, deployment_version, machine_id, cpu_millicores, memory_bytes,
             gpu_count, gpu_type, started_at, ended_at, accrued_to, clock_timestamp() AS now
           FROM metered_containers
           WHERE ended_at IS NULL AND started_at IS NOT NULL AND cpu_millicores IS NOT NULL AND container_id > $1
           ORDER BY container_id LIMIT ${BATCH}
           FOR UPDATE SKIP LOCKED`,
          [after],
        );
        if (!rows.length) return 0;
        const now = rows[0].now.getTime();
        const entries: { row: ContainerRow; allotment: Allotment; slice: UsageSlice }[] = [];
        for (const row of rows) {
          const allotment = allotmentOf(row)!;
          const startedAt = row.started_at!.getTime();
          const accruedTo = row.accrued_to?.getTime() ?? null;
          for (const slice of checkpointSlices(startedAt, accruedTo, now)) entries.push({ row, allotment, slice });
          countAccrued((now - Math.max(startedAt, accruedTo ?? startedAt)) / 1000, allotment);
        }
        await upsertSlices(runner, entries, false);
        await queryRows(
          runner,
          `UPDATE metered_containers SET accrued_to = GREATEST(accrued_to, $2::timestamptz) WHERE container_id = ANY($1::text[])`,
          [rows.map((r) => r.container_id), new Date(now).toISOString()],
        );
        after = rows[rows.length - 1].container_id;
        return rows.length;
      });
      total += done;
      if (done < BATCH) break;
    }
    meteringCheckpointsTotal.inc();
    return total;
  }
}
