import { Injectable } from '@nestjs/common';
import { DataSource, type QueryRunner } from 'typeorm';
import { type ContainerEvent, type ContainerResources, USAGE_INTERVAL } from '#tern/contracts';
import { closedSlices, hourFloor, intervalId, type UsageSlice } from '#tern/metering';
import { Messaging } from '#tern/messaging';
import { queryRows } from '#tern/persistence';
import { allotmentOf, type ContainerRow, countAccrued, upsertSlices } from './slice-rows.js';

const RETURNING = `RETURNING container_id, workspace_id, deployment_id, deployment_version, machine_id, cpu_millicores,
  memory_bytes, gpu_count, gpu_type, started_at, ended_at, accrued_to`;

/**
 * Applies container lifecycle facts to `metered_containers` and, once a container has both a
 * start and an end, writes its final usage slices. Each method is one transaction that first
 * upserts (and so locks) the container's row, so a checkpoint running at the same time either
 * finishes before or skips the container. The rules are order-free — the earliest start and
 * the earliest end win, the allotment comes from `started` alone — because each event kind
 * arrives on its own consumer and a replay interleaves them differently.
 */
@Injectable()
export class ContainerLedger {
  constructor(
    private readonly dataSource: DataSource,
    private readonly messaging: Messaging,
  ) {}

  async started(event: ContainerEvent, resources: ContainerResources): Promise<void> {
    await this.dataSource.transaction(async (m) => {
      const runner = m.queryRunner!;
      const [row] = await queryRows<ContainerRow>(
        runner,
        `INSERT INTO metered_containers AS c (container_id, workspace_id, deployment_id, deployment_version, machine_id,
           cpu_millicores, memory_bytes, gpu_count, gpu_type, started_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
         ON CONFLICT (container_id) DO UPDATE SET
           cpu_millicores = EXCLUDED.cpu_millicores, memory_bytes = EXCLUDED.memory_bytes,
           gpu_count = EXCLUDED.gpu_count, gpu_type = EXCLUDED.gpu_type,
           started_at = LEAST(c.started_at, EXCLUDED.started_at),
           -- An earlier start than the checkpoints assumed: the next one rewrites from the start.
           accrued_to = CASE WHEN EXCLUDED.started_at < c.started_at THEN NULL ELSE c.accrued_to END,
           updated_at = now()
         ${RETURNING}`,
        [
          ...identity(event),
          resources.cpuMillicores,
          resources.memoryBytes,
          resources.gpuCount,
          resources.gpuCount > 0 ? (resources.gpuType ?? null) : null,
          event.at,
        ],
      );
      if (row.ended_at) await this.close(runner, row);
    });
  }

  /** An end of usage at `endAt` (already adjusted for how the container ended). */
  async ended(event: ContainerEvent, endAt: Date, reason: string): Promise<void> {
    await this.dataSource.transaction(async (m) => {
      const runner = m.queryRunner!;
      const [row] = await queryRows<ContainerRow>(
        runner,
        `INSERT INTO metered_containers AS c (container_id, workspace_id, deployment_id, deployment_version, machine_id, ended_at, end_reason)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (container_id) DO UPDATE SET
           end_reason = CASE
             WHEN c.ended_at IS NULL OR EXCLUDED.ended_at < c.ended_at
               OR (EXCLUDED.ended_at = c.ended_at AND EXCLUDED.end_reason < c.end_reason) THEN EXCLUDED.end_reason
             ELSE c.end_reason END,
           ended_at = LEAST(c.ended_at, EXCLUDED.ended_at), updated_at = now()
         ${RETURNING}`,
        [...identity(event), endAt.toISOString(), reason],
      );
      if (row.started_at) await this.close(runner, row);
    });
  }

  /**
   * Replaces whatever checkpoints wrote for the container with its exact slices from start to
   * end. Run on every event that completes or moves the span, so a redelivered event rewrites
   * the same rows and an end earlier than the last checkpoint takes the excess back.
   */
  private async close(runner: QueryRunner, row: ContainerRow): Promise<void> {
    const allotment = allotmentOf(row);
    if (!allotment || !row.started_at || !row.ended_at) return;
    const slices = closedSlices({ startedAt: row.started_at.getTime(), endedAt: row.ended_at.getTime() });
    const removed = await queryRows<{ event_id: string; period_start: Date; seconds: number }>(
      runner,
      `DELETE FROM usage_intervals WHERE container_id = $1 RETURNING event_id, period_start, seconds`,
      [row.container_id],
    );
    await upsertSlices(runner, slices.map((slice) => ({ row, allotment, slice })), true);
    await queryRows(runner, `UPDATE metered_containers SET accrued_to = ended_at WHERE container_id = $1`, [row.container_id]);
    const kept = new Set(slices.map((s) => intervalId(row.container_id, s.periodStart)));
    const dropped = removed.filter((r) => !kept.has(r.event_id)).map((r) => hourFloor(r.period_start.getTime()));
    // Announced before the commit: a failed publish rolls back and the event is redelivered.
    await this.announce(row, [...slices, ...dropped.map((hour) => ({ periodStart: hour, periodEnd: hour, seconds: 0 }))]);
    const before = removed.reduce((sum, r) => sum + r.seconds, 0);
    countAccrued(slices.reduce((sum, s) => sum + s.seconds, 0) - before, allotment);
  }

  private async announce(row: ContainerRow, slices: readonly UsageSlice[]): Promise<void> {
    const resources = {
      cpuMillicores: row.cpu_millicores!,
      memoryBytes: Number(row.memory_bytes),
      gpuCount: row.gpu_count!,
      ...(row.gpu_type ? { gpuType: row.gpu_type } : {}),
    };
    for (const slice of slices) {
      const eventId = intervalId(row.container_id, slice.periodStart);
      const periodEnd = new Date(slice.periodEnd).toISOString();
      await this.messaging.publish(
        USAGE_INTERVAL,
        {
          eventId,
          containerId: row.container_id,
          machineId: row.machine_id,
          workspaceId: row.workspace_id,
          deploymentId: row.deployment_id,
          resources,
          periodStart: new Date(slice.periodStart).toISOString(),
          periodEnd,
          seconds: slice.seconds,
        },
        { msgId: `${eventId}@${periodEnd}` },
      );
    }
  }
}

function identity(event: ContainerEvent): unknown[] {
  return [event.containerId, event.workspaceId, event.deploymentId, event.deploymentVersion, event.machineId];
}
