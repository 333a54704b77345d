/**
 * How fast a device of a kind multiplies, at the least: the floor of its band, in int8
 * multiply-adds per second (int32 sums), the unit of the proof's product (n³ of them). A prover
 * slower than its claimed device's floor fails. Every figure below is a conservative placeholder
 * (`calibrated: false`), far under the device's datasheet, until measured on a real one (the
 * issue's device check): it separates a GPU from a CPU pretending to be one, not yet one GPU
 * model from the next.
 */
export interface ThroughputBand {
  /** The band's name, as a reason names it ("H100"). */
  readonly name: string;
  /** Matches a GPU's model name; the CPU band has none. */
  readonly pattern?: RegExp;
  readonly floorMacsPerSecond: number;
  /** Beyond the allowance, counted in the time to the commitment: none on the CPU, GPU_PROVER_ROUND_TRIP_MS on a GPU. */
  readonly startMs: number;
  /** The challenge's n for a device of this band. */
  readonly n: number;
  readonly calibrated: boolean;
}

/**
 * What a GPU's window holds beyond the product and the allowance: the hop from the agent to the
 * prover's container over its unix socket, A and B copied to the device and C back (96 MiB at
 * n = 4096: tens of milliseconds over PCIe), and C's rows turned into bytes for the tree. The
 * prover's start (its container, PyTorch's import, the CUDA context, the buffers for n, cuBLAS's
 * kernels loaded by a product of zeros) happens before the seed is sent, in the untimed prepare
 * step (AGENT_PROOF_PREPARE, with its own limit), and is not counted here. 500 ms is a placeholder
 * with room for a loaded host, like the floors below, until the device check measures it on a
 * real GPU.
 *
 * The H100's window at LARGE_GPU_CHALLENGE_N is 8.22 s: 5.5 ms of product at the floor, the 7.71 s
 * allowance and this. NumPy did 4096³ in 14.1 s on a 2-core machine at load average 25, so a small
 * CPU misses it by far; a many-core server that does 4096³ through BLAS in a second or two needs
 * 8 to 16 s for 8192³, at or past the window, but a faster one (or int8 matrix units on a CPU) does
 * not: the allowance, which grows as n², is most of the window and a placeholder until calibrated.
 */
export const GPU_PROVER_ROUND_TRIP_MS = 500;

/**
 * n of a CPU's challenge: 16.8 M multiply-adds, tens of milliseconds for an honest core, well
 * under a second at the floor.
 */
export const CPU_CHALLENGE_N = 256;

/**
 * n of a GPU's challenge: its answer (31 revealed rows of 4096 int32 in base64, about 0.7 MB) fits
 * one NATS message, and its check costs the control plane one draw of A and B (32 MiB) and two
 * Freivalds passes: 0.6 to 1.4 s of CPU on a 2-core machine at load average 13 to 24, in a worker thread.
 */
export const GPU_CHALLENGE_N = 4096;

/**
 * n of the fastest GPUs' challenge (H200, H100, A100): twice GPU_CHALLENGE_N, eight times the
 * product, so a CPU that computes 4096³ through BLAS within the H100's window at 4096 (a second
 * or two on a many-core server) needs 8 to 16 s at 8192, at or past the window's 8.22 s, while
 * the window's allowance grows only four times. Its answer (31 rows of 8192 int32, 1.4 MB in base64)
 * no longer fits one NATS message: the probe is answered in parts (probeParts). Its check costs the
 * control plane four times GPU_CHALLENGE_N's, in a worker thread.
 */
export const LARGE_GPU_CHALLENGE_N = 8192;

/**
 * The CPU band: what the reference prover (one thread, plain JavaScript) does at the least on a
 * busy machine. Measured: 37 to 57 M/s on a 2-core machine at load average 24, so the floor
 * leaves a loaded honest machine a wide margin. Thread count is not proven: one thread answers.
 */
export const CPU_BAND: ThroughputBand = { name: 'CPU', floorMacsPerSecond: 5e6, startMs: 0, n: CPU_CHALLENGE_N, calibrated: false };

/** A GPU's band: every one uncalibrated until the device check measures it. */
function gpu(name: string, pattern: RegExp, floorMacsPerSecond: number, n = GPU_CHALLENGE_N): ThroughputBand {
  return { name, pattern, floorMacsPerSecond, startMs: GPU_PROVER_ROUND_TRIP_MS, n, calibrated: false };
}

/** Most specific first: the first whose pattern matches a model name is its band. */
export const GPU_BANDS: readonly ThroughputBand[] = [
  gpu('H200', /\bH200\b/i, 100e12, LARGE_GPU_CHALLENGE_N),
  gpu('H100', /\bH100\b/i, 100e12, LARGE_GPU_CHALLENGE_N),
  gpu('A100', /\bA100\b/i, 50e12, LARGE_GPU_CHALLENGE_N),
  gpu('L40S', /\bL40S\b/i, 50e12),
  gpu('RTX 4090', /\b4090\b/i, 40e12),
  gpu('L4', /\bL4\b/i, 20e12),
  gpu('A10', /\bA10G?\b/i, 20e12),
  gpu('RTX 3090', /\b3090\b/i, 10e12),
  gpu('V100', /\bV100\b/i, 5e12),
  gpu('T4', /\bT4\b/i, 5e12),
];

/** A GPU of a model the table does not list still claims to be a GPU. */
export const UNLISTED_GPU_BAND: ThroughputBand = {
  name: 'unlisted GPU',
  floorMacsPerSecond: 1e12,
  startMs: GPU_PROVER_ROUND_TRIP_MS,
  n: GPU_CHALLENGE_N,
  calibrated: false,
};

export function gpuBand(model: string): ThroughputBand {
  return GPU_BANDS.find((b) => b.pattern!.test(model)) ?? UNLISTED_GPU_BAND;
}

/**
 * Time a prover gets beyond the product itself: drawing A and B (2n² bytes of AES), hashing C's
 * rows (4n² bytes of SHA-256), a worker's start and the round trip. One second plus 0.1 ms per
 * thousand entries of C (2.68 s at n = 4096).
 */
export function allowanceMs(n: number): number {
  return 1000 + (n * n) / 10_000;
}

/** The longest a device of `band` may take from the challenge to its commitment. */
export function commitmentDeadlineMs(band: ThroughputBand, n: number): number {
  return Math.ceil((n ** 3 / band.floorMacsPerSecond) * 1000 + allowanceMs(n) + band.startMs);
}

/** 1.2 G, 100 T: multiply-adds per second in words. */
export function formatRate(perSecond: number): string {
  const units: [number, string][] = [
    [1e12, 'T'],
    [1e9, 'G'],
    [1e6, 'M'],
    [1e3, 'k'],
  ];
  const [scale, unit] = units.find(([s]) => perSecond >= s) ?? [1, ''];
  return `${Number((perSecond / scale).toPrecision(3))} ${unit}`.trimEnd();
}
