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
 * The H100's window at GPU_CHALLENGE_N is 3.18 s: 0.7 ms of product at the floor, the 2.68 s
 * allowance and this. What remains open: NumPy did 4096³ in 14.1 s on a 2-core machine at load
 * average 25, so a small CPU misses the window, but a many-core server running an exact float64
 * product through BLAS does 4096³ in a second or two and can still pass as a GPU. Ruling that out
 * needs a larger n, whose answer (31 revealed rows of n int32) no longer fits one NATS message
 * (1 MiB max_payload) and would have to be split across several.
 */
export const GPU_PROVER_ROUND_TRIP_MS = 500;

/**
 * The CPU band: what the reference prover (one thread, plain JavaScript) does at the least on a
 * busy machine. Measured: 37 to 57 M/s on a 2-core machine at load average 24, so the floor
 * leaves a loaded honest machine a wide margin. Thread count is not proven: one thread answers.
 */
export const CPU_BAND: ThroughputBand = { name: 'CPU', floorMacsPerSecond: 5e6, startMs: 0, calibrated: false };

/** Most specific first: the first whose pattern matches a model name is its band. */
export const GPU_BANDS: readonly ThroughputBand[] = [
  { name: 'H200', pattern: /\bH200\b/i, floorMacsPerSecond: 100e12, startMs: GPU_PROVER_ROUND_TRIP_MS, calibrated: false },
  { name: 'H100', pattern: /\bH100\b/i, floorMacsPerSecond: 100e12, startMs: GPU_PROVER_ROUND_TRIP_MS, calibrated: false },
  { name: 'A100', pattern: /\bA100\b/i, floorMacsPerSecond: 50e12, startMs: GPU_PROVER_ROUND_TRIP_MS, calibrated: false },
  { name: 'L40S', pattern: /\bL40S\b/i, floorMacsPerSecond: 50e12, startMs: GPU_PROVER_ROUND_TRIP_MS, calibrated: false },
  { name: 'RTX 4090', pattern: /\b4090\b/i, floorMacsPerSecond: 40e12, startMs: GPU_PROVER_ROUND_TRIP_MS, calibrated: false },
  { name: 'L4', pattern: /\bL4\b/i, floorMacsPerSecond: 20e12, startMs: GPU_PROVER_ROUND_TRIP_MS, calibrated: false },
  { name: 'A10', pattern: /\bA10G?\b/i, floorMacsPerSecond: 20e12, startMs: GPU_PROVER_ROUND_TRIP_MS, calibrated: false },
  { name: 'RTX 3090', pattern: /\b3090\b/i, floorMacsPerSecond: 10e12, startMs: GPU_PROVER_ROUND_TRIP_MS, calibrated: false },
  { name: 'V100', pattern: /\bV100\b/i, floorMacsPerSecond: 5e12, startMs: GPU_PROVER_ROUND_TRIP_MS, calibrated: false },
  { name: 'T4', pattern: /\bT4\b/i, floorMacsPerSecond: 5e12, startMs: GPU_PROVER_ROUND_TRIP_MS, calibrated: false },
];

/** A GPU of a model the table does not list still claims to be a GPU. */
export const UNLISTED_GPU_BAND: ThroughputBand = {
  name: 'unlisted GPU',
  floorMacsPerSecond: 1e12,
  startMs: GPU_PROVER_ROUND_TRIP_MS,
  calibrated: false,
};

export function gpuBand(model: string): ThroughputBand {
  return GPU_BANDS.find((b) => b.pattern!.test(model)) ?? UNLISTED_GPU_BAND;
}

/**
 * n of a CPU's challenge: 16.8 M multiply-adds, tens of milliseconds for an honest core, well
 * under a second at the floor.
 */
export const CPU_CHALLENGE_N = 256;

/**
 * n of a GPU's challenge: the largest whose answer fits one NATS message (31 revealed rows of
 * 4096 int32 in base64, about 0.7 MB, under the 1 MiB default max_payload) and whose check costs
 * the control plane one draw of A and B (32 MiB) and two Freivalds passes: 1.4 s of CPU measured on
 * a 2-core machine at load average 24.
 */
export const GPU_CHALLENGE_N = 4096;

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
