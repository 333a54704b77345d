import { trustedWith } from './trust.js';
import { formatBytes, formatCpu, freeGpus, freeResources, fullnessAfter, mostOfOneType, pickGpus, type GpuPick } from './resources.js';
import {
  DEFAULT_PLACEMENT_OPTIONS,
  type MachineView,
  type PlacementOptions,
  type PlacementRequest,
  type PlacementResult,
  type Unplaced,
} from './types.js';

interface Candidate {
  readonly machine: MachineView;
  readonly gpus: GpuPick;
  readonly fullness: number;
}

/**
 * Chooses the machine for one container, or says why none will do.
 *
 * Filters, in this order (the first that leaves no machine names the reason): ready and in
 * the request's pool; not quarantined, and verified when the request asks for it; has enough GPUs of an acceptable type at all; reputation at least the
 * minimum (unscored machines pass); enough of those GPUs free; enough free CPU; enough free
 * memory after the system's headroom. "The most free" in a reason is taken over the machines
 * that passed the earlier filters, so it names the resource that actually binds.
 *
 * Ranks what is left by: the user's GPU preference (an earlier type wins); for CPU-only
 * containers, machines without GPUs first (a GPU is the scarce thing: CPU work must not
 * strand it); a machine that holds the image already (it starts without a pull, as RunPod
 * places near cached models); best fit (the fullest machine after placing, see fullnessAfter); reputation
 * (unscored counts as 0 here, so a proven machine wins a tie); then id, so the answer is
 * deterministic.
 */
export function place(
  request: PlacementRequest,
  machines: readonly MachineView[],
  options: PlacementOptions = DEFAULT_PLACEMENT_OPTIONS,
): PlacementResult {
  let left = machines.filter((m) => m.state === 'ready' && m.pool === request.pool);
  if (!left.length) return { reason: `no ready machine in pool ${request.pool}` };

  const trusted = trustedFor(request, left);
  if ('reason' in trusted) return trusted;
  left = trusted.machines;

  if (request.gpuCount > 0) {
    left = left.filter((m) => pickGpus(m.capacity.gpus, request));
    if (!left.length) return { reason: `no ready machine in pool ${request.pool} with ${gpuPhrase(request)}` };
  }

  if (request.minReputation !== undefined) {
    const min = request.minReputation;
    const scored = left.filter((m) => m.reputation === undefined || m.reputation >= min);
    if (!scored.length) {
      const best = most(left, (m) => m.reputation ?? 0);
      return {
        reason: `no machine in pool ${request.pool} has the minimum reputation ${min}: the best is ${round(best.value)} (${best.id})`,
      };
    }
    left = scored;
  }

  if (request.gpuCount > 0) {
    const free = left.filter((m) => pickGpus(freeGpus(m), request));
    if (!free.length) {
      const best = most(left, (m) => mostOfOneType(freeGpus(m), request));
      return { reason: `not enough free GPUs: needs ${gpuPhrase(request)}, the most free is ${best.value} (${best.id})` };
    }
    left = free;
  }

  const cpu = left.filter((m) => freeResources(m, options).cpuMillicores >= request.cpuMillicores);
  if (!cpu.length) {
    const best = most(left, (m) => freeResources(m, options).cpuMillicores);
    return {
      reason: `not enough free CPU: needs ${formatCpu(request.cpuMillicores)}, the most free is ${formatCpu(best.value)} (${best.id})`,
    };
  }
  left = cpu;

  const memory = left.filter((m) => freeResources(m, options).memoryBytes >= request.memoryBytes);
  if (!memory.length) {
    const best = most(left, (m) => freeResources(m, options).memoryBytes);
    return {
      reason: `not enough free memory: needs ${formatBytes(request.memoryBytes)}, the most free is ${formatBytes(best.value)} (${best.id})`,
    };
  }

  const ranked = memory
    .map((machine): Candidate => ({
      machine,
      gpus: pickGpus(freeGpus(machine), request)!,
      fullness: fullnessAfter(machine, request, options),
    }))
    .sort((a, b) => compare(a, b, request));
  const chosen = ranked[0];
  return {
    machineId: chosen.machine.id,
    gpuIndexes: chosen.gpus.indexes,
    ...(chosen.gpus.type ? { gpuType: chosen.gpus.type } : {}),
  };
}

function compare(a: Candidate, b: Candidate, request: PlacementRequest): number {
  return (
    a.gpus.rank - b.gpus.rank ||
    (request.gpuCount === 0 ? Number(a.machine.capacity.gpus.length > 0) - Number(b.machine.capacity.gpus.length > 0) : 0) ||
    Number(Boolean(b.machine.holdsImage)) - Number(Boolean(a.machine.holdsImage)) ||
    b.fullness - a.fullness ||
    (b.machine.reputation ?? 0) - (a.machine.reputation ?? 0) ||
    (a.machine.id < b.machine.id ? -1 : a.machine.id > b.machine.id ? 1 : 0)
  );
}

/** "gpu A100", "2× gpu A100 or H100", "a GPU", "2 GPUs". */
export function gpuPhrase(request: Pick<PlacementRequest, 'gpuTypes' | 'gpuCount'>): string {
  if (!request.gpuTypes.length) return request.gpuCount === 1 ? 'a GPU' : `${request.gpuCount} GPUs`;
  return `${request.gpuCount > 1 ? `${request.gpuCount}× ` : ''}gpu ${request.gpuTypes.join(' or ')}`;
}

/** The machine with the highest value, the lowest id on a tie. */
function most(machines: readonly MachineView[], value: (m: MachineView) => number): { id: string; value: number } {
  let best = { id: machines[0].id, value: value(machines[0]) };
  for (const m of machines.slice(1)) {
    const v = value(m);
    if (v > best.value || (v === best.value && m.id < best.id)) best = { id: m.id, value: v };
  }
  return best;
}

function round(n: number): number {
  return Math.round(n * 100) / 100;
}

/** Quarantined machines get nothing; a request for verified machines gets only those. */
function trustedFor(request: PlacementRequest, ready: readonly MachineView[]): { machines: MachineView[] } | Unplaced {
  const open = ready.filter((m) => m.verification !== 'quarantined');
  if (!open.length) return { reason: `every ready machine in pool ${request.pool} is quarantined (tern machine show says why)` };
  if (!request.verified) return { machines: open };
  const verified = open.filter((m) => trustedWith(request, m));
  if (!verified.length)
    return {
      reason: `no verified machine in pool ${request.pool}: ${open.length} ready machine(s) have not proven their hardware yet, and this workload asks for verified ones (placement.verified)`,
    };
  return { machines: verified };
}
