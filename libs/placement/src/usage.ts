import type { MachineCapacity, MachineUsage } from './types.js';

/** What a placed container holds on its machine, as the scheduler records it. */
export interface HeldResources {
  readonly cpuMillicores?: number;
  readonly memoryBytes?: number;
  readonly gpuIndexes?: readonly number[];
}

/** The sum of what a machine's active containers hold; missing numbers count as nothing. */
export function usageOf(containers: readonly HeldResources[]): MachineUsage {
  const gpuIndexes = new Set<number>();
  let cpuMillicores = 0;
  let memoryBytes = 0;
  for (const c of containers) {
    cpuMillicores += c.cpuMillicores ?? 0;
    memoryBytes += c.memoryBytes ?? 0;
    for (const i of c.gpuIndexes ?? []) gpuIndexes.add(i);
  }
  return { cpuMillicores, memoryBytes, gpuIndexes: [...gpuIndexes].sort((a, b) => a - b) };
}

/** A machine's size from its registration; an agent that has not reported yet has none. */
export function capacityOf(row: {
  cpuThreads: number | null;
  memoryBytes: number | null;
  gpus: readonly { index: number; model: string }[] | null;
}): MachineCapacity {
  return {
    cpuMillicores: (row.cpuThreads ?? 0) * 1000,
    memoryBytes: row.memoryBytes ?? 0,
    gpus: (row.gpus ?? []).map((g) => ({ index: g.index, model: g.model })),
  };
}
