import { CPU_BAND, commitmentDeadlineMs, formatRate, gpuBand, type ThroughputBand } from './bands.js';

/** What a machine says it has, as its registration stored it. */
export interface ClaimedInventory {
  readonly cpuModel: string | null;
  readonly cpuThreads: number | null;
  /** A GPU's memoryBytes: what discovery reported at registration (nvidia-smi's memory.total). */
  readonly gpus: readonly { readonly index: number; readonly model: string; readonly memoryBytes?: number }[];
}

/**
 * The share of a GPU's claimed memory its prover leaves out of what it allocates in the prepare
 * step: the CUDA context (300 to 600 MiB, more with cuBLAS's workspace), memory the driver keeps
 * back from what nvidia-smi reports as the total, and the allocator's rounding. 10 % covers that
 * on a 16 GB T4 (1.6 GB) and still tells each claim from the next size down (80 from 48 GB, 40
 * from 24 GB).
 */
export const MEMORY_MARGIN = 0.1;

/** What a prover must allocate and touch on a device that claims `claimedBytes`. */
export function memoryToAllocate(claimedBytes: number): number {
  return Math.floor(claimedBytes * (1 - MEMORY_MARGIN));
}

/** One device a machine must prove, with its challenge's size and deadline. */
export interface DeviceClaim {
  /** `cpu` or `gpu:<index>`: which device the agent's prover runs the challenge on. */
  readonly device: string;
  /** For reasons: `GPU 0 (NVIDIA H100 80GB HBM3)`. */
  readonly label: string;
  readonly band: ThroughputBand;
  readonly n: number;
  readonly deadlineMs: number;
  /** The device's claimed memory, which its prover allocates while getting ready; none for the CPU. */
  readonly claimedMemoryBytes?: number;
}

/** The machine's devices in the order they are challenged: the CPU, then each GPU. */
export function deviceClaims(inventory: ClaimedInventory): DeviceClaim[] {
  const claim = (device: string, label: string, band: ThroughputBand, memoryBytes?: number): DeviceClaim => ({
    device,
    label,
    band,
    n: band.n,
    deadlineMs: commitmentDeadlineMs(band, band.n),
    ...(memoryBytes ? { claimedMemoryBytes: memoryBytes } : {}),
  });
  return [
    claim('cpu', `CPU (${inventory.cpuModel ?? 'unknown model'})`, CPU_BAND),
    ...[...inventory.gpus]
      .sort((a, b) => a.index - b.index)
      .map((g) => claim(`gpu:${g.index}`, `GPU ${g.index} (${g.model})`, gpuBand(g.model), g.memoryBytes)),
  ];
}

export type TimingVerdict = { ok: true; macsPerSecond: number } | { ok: false; reason: string };

/** Whether the commitment came within the claimed device's band; the reason names the figures when not. */
export function judgeTiming(claim: DeviceClaim, elapsedMs: number | undefined): TimingVerdict {
  const floor = `the ${claim.band.name} band's floor of ${formatRate(claim.band.floorMacsPerSecond)} multiply-adds/s${claim.band.calibrated ? '' : ' (uncalibrated)'}`;
  const work = `a ${claim.n}×${claim.n} int8 product`;
  if (elapsedMs === undefined)
    return { ok: false, reason: `${claim.label} did not commit to ${work} within ${seconds(claim.deadlineMs)}, the time ${floor} allows` };
  const macsPerSecond = claim.n ** 3 / (Math.max(elapsedMs, 1) / 1000);
  if (elapsedMs > claim.deadlineMs)
    return {
      ok: false,
      reason: `${claim.label} took ${seconds(elapsedMs)} to commit to ${work} (${formatRate(macsPerSecond)} multiply-adds/s): ${floor} allows ${seconds(claim.deadlineMs)}`,
    };
  return { ok: true, macsPerSecond };
}

/** Whether the prover got ready holding the device's claimed memory, less the margin; the reason names both figures when not. */
export function judgeMemory(claim: DeviceClaim, allocatedBytes: number | undefined): { ok: true } | { ok: false; reason: string } {
  if (!claim.claimedMemoryBytes) return { ok: true };
  const needed = memoryToAllocate(claim.claimedMemoryBytes);
  if ((allocatedBytes ?? 0) >= needed) return { ok: true };
  return {
    ok: false,
    reason: `${claim.label} claims ${claim.claimedMemoryBytes} bytes of memory, but its prover allocated ${allocatedBytes ?? 0} of the ${needed} it must (${(1 - MEMORY_MARGIN) * 100} %)`,
  };
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 0)} s`;
}
