import { intervalId, resourceSeconds, type UsageSlice } from '#tern/metering';
import { type MeteredContainerState, type UsageRepository } from '#tern/persistence';
import {
  meteringCpuCoreSecondsTotal,
  meteringGpuSecondsTotal,
  meteringIntervalsWrittenTotal,
  meteringMemoryGibSecondsTotal,
} from '../metering-metrics.js';

export interface Allotment {
  cpuMillicores: number;
  memoryBytes: number;
  gpuCount: number;
}

/** The container's allotment, or null until `container.started` told it. */
export function allotmentOf(row: MeteredContainerState): Allotment | null {
  if (row.cpuMillicores === null || row.memoryBytes === null || row.gpuCount === null) return null;
  return { cpuMillicores: row.cpuMillicores, memoryBytes: row.memoryBytes, gpuCount: row.gpuCount };
}

/**
 * Writes slices of containers as usage intervals (UsageRepository.upsertSlices: a checkpoint,
 * `closed` false, leaves a closed slice alone; a close replaces it).
 */
export async function upsertSlices(
  tx: UsageRepository,
  entries: readonly { row: MeteredContainerState; allotment: Allotment; slice: UsageSlice }[],
  closed: boolean,
): Promise<void> {
  if (!entries.length) return;
  await tx.upsertSlices(
    entries.map(({ row, allotment, slice }) => ({
      eventId: intervalId(row.containerId, slice.periodStart),
      workspaceId: row.workspaceId,
      deploymentId: row.deploymentId,
      containerId: row.containerId,
      machineId: row.machineId,
      gpuType: row.gpuType,
      gpuCount: allotment.gpuCount,
      cpuMillicores: allotment.cpuMillicores,
      memoryBytes: allotment.memoryBytes,
      periodStart: new Date(slice.periodStart).toISOString(),
      periodEnd: new Date(slice.periodEnd).toISOString(),
      seconds: slice.seconds,
    })),
    closed,
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
