import { gpuTypeMatches as matchesByWords } from '#tern/contracts';
import type { MachineGpuView, MachineView, PlacementOptions, PlacementRequest } from './types.js';

const matches = new Map<string, Map<string, boolean>>();
let remembered = 0;

/**
 * gpuTypeMatches, remembered: placement asks it for every GPU of every machine, and a fleet has
 * few models and requests few types. Two map lookups, no key built per call (the joined-string
 * key was most of placeMany's time at 10,000 machines). Forgotten wholesale past 10,000 pairs
 * (types are user input).
 */
function gpuTypeMatches(model: string, type: string): boolean {
  let byType = matches.get(model);
  if (!byType) matches.set(model, (byType = new Map()));
  let answer = byType.get(type);
  if (answer === undefined) {
    if (remembered >= 10_000) {
      matches.clear();
      matches.set(model, byType);
      byType.clear();
      remembered = 0;
    }
    answer = matchesByWords(model, type);
    byType.set(type, answer);
    remembered++;
  }
  return answer;
}

/** Memory kept back for the system: the larger of the share and the floor, at most half the machine. */
export function memoryHeadroom(memoryBytes: number, options: PlacementOptions): number {
  return Math.min(memoryBytes / 2, Math.max(memoryBytes * options.memoryHeadroomFraction, options.memoryHeadroomBytes));
}

/** What containers may still be given, never below zero (a machine that shrank can be over-full). */
export function freeResources(m: MachineView, options: PlacementOptions): { cpuMillicores: number; memoryBytes: number } {
  const memory = m.capacity.memoryBytes - memoryHeadroom(m.capacity.memoryBytes, options);
  return {
    cpuMillicores: Math.max(0, m.capacity.cpuMillicores - m.used.cpuMillicores),
    memoryBytes: Math.max(0, memory - m.used.memoryBytes),
  };
}

export function freeGpus(m: MachineView): MachineGpuView[] {
  const taken = m.used.gpuIndexes;
  // A machine has a handful of GPUs: includes() on the few taken beats building a Set per call.
  const free = taken.length ? m.capacity.gpus.filter((g) => !taken.includes(g.index)) : [...m.capacity.gpus];
  return sortedByIndex(free) ? free : free.sort((a, b) => a.index - b.index);
}

function sortedByIndex(gpus: readonly MachineGpuView[]): boolean {
  for (let i = 1; i < gpus.length; i++) if (gpus[i - 1].index > gpus[i].index) return false;
  return true;
}

export interface GpuPick {
  /** Position of the matched type in the request's preference list (0 for any type). */
  readonly rank: number;
  readonly indexes: number[];
  readonly type?: string;
}

/**
 * The GPUs a container would get from `gpus`: all of one requested type, the earliest type in
 * the preference list that has enough; with no types, all of one model (a container split
 * over two models would run at the slower one's pace), the model with the lowest index first.
 */
export function pickGpus(gpus: readonly MachineGpuView[], request: Pick<PlacementRequest, 'gpuTypes' | 'gpuCount'>): GpuPick | undefined {
  if (request.gpuCount <= 0) return { rank: 0, indexes: [] };
  const take = (of: MachineGpuView[]) => of.slice(0, request.gpuCount).map((g) => g.index);
  if (!request.gpuTypes.length) {
    for (const model of new Set(gpus.map((g) => g.model))) {
      const same = gpus.filter((g) => g.model === model);
      if (same.length >= request.gpuCount) return { rank: 0, indexes: take(same), type: model };
    }
    return undefined;
  }
  for (const [rank, type] of request.gpuTypes.entries()) {
    const matching = gpus.filter((g) => gpuTypeMatches(g.model, type));
    if (matching.length >= request.gpuCount) return { rank, indexes: take(matching), type };
  }
  return undefined;
}

/** The most GPUs of one acceptable type among `gpus`, for "the most free is …". */
export function mostOfOneType(gpus: readonly MachineGpuView[], request: Pick<PlacementRequest, 'gpuTypes'>): number {
  const groups = request.gpuTypes.length
    ? request.gpuTypes.map((t) => gpus.filter((g) => gpuTypeMatches(g.model, t)).length)
    : [...new Set(gpus.map((g) => g.model))].map((model) => gpus.filter((g) => g.model === model).length);
  return Math.max(0, ...groups);
}

/**
 * How full the machine would be with the container on it: the largest share used of any
 * resource it has (CPU, memory after headroom, GPUs when it has any). The resource closest
 * to running out is the one that decides how much more the machine can take, so packing by
 * it leaves the emptiest machines empty, free to drain and to take large containers.
 */
export function fullnessAfter(m: MachineView, request: PlacementRequest, options: PlacementOptions): number {
  const memory = m.capacity.memoryBytes - memoryHeadroom(m.capacity.memoryBytes, options);
  const shares = [
    share(m.used.cpuMillicores + request.cpuMillicores, m.capacity.cpuMillicores),
    share(m.used.memoryBytes + request.memoryBytes, memory),
  ];
  if (m.capacity.gpus.length) shares.push(share(m.used.gpuIndexes.length + request.gpuCount, m.capacity.gpus.length));
  return Math.max(...shares);
}

function share(used: number, total: number): number {
  return total > 0 ? used / total : 1;
}

export function formatBytes(bytes: number): string {
  const gib = bytes / 2 ** 30;
  if (gib >= 1) return `${trim(gib)} GiB`;
  return `${Math.round(bytes / 2 ** 20)} MiB`;
}

export function formatCpu(millicores: number): string {
  const cores = millicores / 1000;
  return `${Math.round(cores * 100) / 100} ${cores === 1 ? 'core' : 'cores'}`;
}

function trim(n: number): string {
  return String(Math.round(n * 10) / 10);
}
