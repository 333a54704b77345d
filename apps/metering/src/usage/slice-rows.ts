import type { QueryRunner } from 'typeorm';
import { intervalId, resourceSeconds, type UsageSlice } from '#tern/metering';
import { queryRows } from '#tern/persistence';
import { meteringCpuCoreSecondsTotal, meteringGpuSecondsTotal, meteringIntervalsWrittenTotal, meteringMemoryGibSecondsTotal } from '../metering-metrics.js';

/** A metered_containers row as node-postgres returns it. */
export interface ContainerRow {
  container_id: string;
  workspace_id: string;
  deployment_id: string;
  deployment_version: number;
  machine_id: string;
  cpu_millicores: number | null;
  memory_bytes: string | null;
  gpu_count: number | null;
  gpu_type: string | null;
  started_at: Date | null;
  ended_at: Date | null;
  accrued_to: Date | null;
}

export interface Allotment {
  cpuMillicores: number;
  memoryBytes: number;
  gpuCount: number;
}

/** The container's allotment, or null until `container.started` told it. */
export function allotmentOf(row: ContainerRow): Allotment | null {
  if (row.cpu_millicores === null || row.memory_bytes === null || row.gpu_count === null) return null;
  return { cpuMillicores: row.cpu_millicores, memoryBytes: Number(row.memory_bytes), gpuCount: row.gpu_count };
}

const COLUMNS = 13;

/**
 * Upserts slices of containers into usage_intervals, keyed on the slice id (container + hour),
 * so writing a slice again replaces it. A slice already closed is left alone by a checkpoint
 * (`closed` false) and replaced by a close (`closed` true).
 */
export async function upsertSlices(
  runner: QueryRunner,
  entries: readonly { row: ContainerRow; allotment: Allotment; slice: UsageSlice }[],
  closed: boolean,
): Promise<void> {
  if (!entries.length) return;
  const values: unknown[] = [];
  const tuples = entries.map(({ row, allotment, slice }, i) => {
    values.push(
      intervalId(row.container_id, slice.periodStart),
      row.workspace_id,
      row.deployment_id,
      row.container_id,
      row.machine_id,
      row.gpu_type,
      allotment.gpuCount,
      allotment.cpuMillicores,
      allotment.memoryBytes,
      new Date(slice.periodStart).toISOString(),
      new Date(slice.periodEnd).toISOString(),
      slice.seconds,
      closed,
    );
    const base = i * COLUMNS;
    return `(${Array.from({ length: COLUMNS }, (_, k) => `$${base + k + 1}`).join(', ')})`;
  });
  await queryRows(
    runner,
    `INSERT INTO usage_intervals AS u (event_id, workspace_id, deployment_id, container_id, machine_id, gpu_type, gpu_count,
       cpu_millicores, memory_bytes, period_start, period_end, seconds, closed)
     VALUES ${tuples.join(', ')}
     ON CONFLICT (event_id) DO UPDATE SET
       period_start = EXCLUDED.period_start, period_end = EXCLUDED.period_end, seconds = EXCLUDED.seconds,
       closed = EXCLUDED.closed, updated_at = now()
     WHERE EXCLUDED.closed OR NOT u.closed`,
    values,
  );
  meteringIntervalsWrittenTotal.inc({ by: closed ? 'close' : 'checkpoint' }, entries.length);
}

/** Adds usage to the Prometheus counters; negative corrections are left out (counters only rise). */
export function countAccrued(seconds: number, allotment: Allotment): void {
  if (!(seconds > 0)) return;
  const r = resourceSeconds(seconds, allotment);
  meteringGpuSecondsTotal.inc(r.gpuSeconds);
  meteringCpuCoreSecondsTotal.inc(r.cpuCoreSeconds);
  meteringMemoryGibSecondsTotal.inc(r.memoryGibSeconds);
}
