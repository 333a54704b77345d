import {
  allowanceMs,
  commitmentDeadlineMs,
  CPU_BAND,
  formatRate,
  GPU_BANDS,
  GPU_PROVER_ROUND_TRIP_MS,
  gpuBand,
  UNLISTED_GPU_BAND,
} from './bands.js';
import { deviceClaims, judgeMemory, judgeTiming, MEMORY_MARGIN, memoryToAllocate } from './device-claims.js';
import { multiply } from './matrices.js';
import { nextChallengeDelayMs, verificationAfter } from './verification.js';
import { decodeInt32, encodeInt32 } from './wire.js';

const eightH100 = {
  cpuModel: 'AMD EPYC 7B13',
  cpuThreads: 384,
  gpus: Array.from({ length: 8 }, (_, index) => ({ index: 7 - index, model: 'NVIDIA H100 80GB HBM3' })),
};

describe('verification states', () => {
  it('verifies a machine whose every device passed, quarantines one that failed, leaves one that never answered unverified', () => {
    expect(verificationAfter({ kind: 'passed', summary: 'proved CPU' })).toEqual({ state: 'verified', reason: 'proved CPU' });
    expect(verificationAfter({ kind: 'failed', reason: 'GPU 0 too slow' })).toEqual({ state: 'quarantined', reason: 'GPU 0 too slow' });
    expect(verificationAfter({ kind: 'unanswered', reason: 'no prover' })).toEqual({ state: 'unverified', reason: 'no prover' });
  });

  it('draws the next challenge around the interval, never the same time twice in a row', () => {
    expect(nextChallengeDelayMs(1000, 0.5, () => 0)).toBe(500);
    expect(nextChallengeDelayMs(1000, 0.5, () => 0.5)).toBe(1000);
    expect(nextChallengeDelayMs(1000, 0.5, () => 0.999_999)).toBe(1500);
    const draws = new Set(Array.from({ length: 50 }, () => nextChallengeDelayMs(3_600_000, 0.5)));
    expect(draws.size).toBeGreaterThan(40);
    for (const d of draws) expect(d).toBeGreaterThanOrEqual(1_800_000);
  });
});

describe('throughput bands', () => {
  it('finds the band of each GPU model by its name, and a floor for models it does not list', () => {
    expect(gpuBand('NVIDIA H100 80GB HBM3').name).toBe('H100');
    expect(gpuBand('NVIDIA H200').name).toBe('H200');
    expect(gpuBand('NVIDIA A100-SXM4-80GB').name).toBe('A100');
    expect(gpuBand('NVIDIA L4').name).toBe('L4');
    expect(gpuBand('NVIDIA L40S').name).toBe('L40S');
    expect(gpuBand('NVIDIA GeForce RTX 4090').name).toBe('RTX 4090');
    expect(gpuBand('Tesla T4').name).toBe('T4');
    expect(gpuBand('NVIDIA A10G').name).toBe('A10');
    expect(gpuBand('Radeon Instinct MI300X')).toBe(UNLISTED_GPU_BAND);
  });

  it('marks every figure uncalibrated until a real device has been measured', () => {
    expect([CPU_BAND, UNLISTED_GPU_BAND, ...GPU_BANDS].every((b) => !b.calibrated)).toBe(true);
  });

  it('challenges the CPU first, then each GPU in index order, sized and timed for the claimed device', () => {
    const claims = deviceClaims(eightH100);
    expect(claims.map((c) => c.device)).toEqual(['cpu', ...Array.from({ length: 8 }, (_, i) => `gpu:${i}`)]);
    expect(claims[1]).toMatchObject({ label: 'GPU 0 (NVIDIA H100 80GB HBM3)', n: 4096, band: { name: 'H100' } });
    expect(deviceClaims({ cpuModel: null, cpuThreads: null, gpus: [] })).toEqual([
      expect.objectContaining({ device: 'cpu', label: 'CPU (unknown model)', n: 256 }),
    ]);
  });

  it("gives a CPU's challenge a deadline of seconds, and a GPU's one no CPU can meet", () => {
    const [cpu, gpu] = deviceClaims(eightH100);
    // The CPU's: 16.8 M multiply-adds at the floor plus the allowance.
    expect(cpu!.deadlineMs).toBe(Math.ceil((256 ** 3 / CPU_BAND.floorMacsPerSecond) * 1000 + allowanceMs(256)));
    expect(cpu!.deadlineMs).toBeLessThan(5000);
    // An H100's: the product is nothing at its floor; the allowance is for drawing and hashing, and
    // the round trip to the GPU prover, started before the seed was sent (the prepare step).
    expect(gpu!.deadlineMs).toBe(commitmentDeadlineMs(gpuBand('H100'), 4096));
    expect(gpu!.deadlineMs).toBe(Math.ceil((4096 ** 3 / 100e12) * 1000 + allowanceMs(4096) + GPU_PROVER_ROUND_TRIP_MS));
    expect(gpu!.deadlineMs).toBe(3179);
    // Meeting it on a CPU takes 21.6 G multiply-adds/s, thousands of times one core of the
    // reference prover (a many-core BLAS still does it: bands.ts says so).
    expect(4096 ** 3 / (gpu!.deadlineMs / 1000)).toBeGreaterThan(20e9);
  });

  it("carries each GPU's claimed memory, and fails a prover that allocated less than it less the margin, naming both", () => {
    const claimed = 81_559 * 2 ** 20;
    const [cpu, gpu] = deviceClaims({
      cpuModel: null,
      cpuThreads: null,
      gpus: [{ index: 0, model: 'NVIDIA H100 80GB HBM3', memoryBytes: claimed }],
    });
    expect(cpu!.claimedMemoryBytes).toBeUndefined();
    expect(gpu!.claimedMemoryBytes).toBe(claimed);
    expect(MEMORY_MARGIN).toBe(0.1);
    expect(memoryToAllocate(claimed)).toBe(Math.floor(claimed * 0.9));
    expect(judgeMemory(cpu!, undefined)).toEqual({ ok: true });
    expect(judgeMemory(gpu!, memoryToAllocate(claimed))).toEqual({ ok: true });
    expect(judgeMemory(gpu!, 24 * 2 ** 30)).toEqual({
      ok: false,
      reason: `GPU 0 (NVIDIA H100 80GB HBM3) claims 85520809984 bytes of memory, but its prover allocated 25769803776 of the 76968728985 it must (90 %)`,
    });
    expect(judgeMemory(gpu!, undefined)).toMatchObject({ ok: false, reason: expect.stringContaining('allocated 0 of the') });
  });

  it('measures a CPU product well inside its band here', () => {
    const n = 256;
    const a = Int8Array.from({ length: n * n }, (_, i) => (i * 7) % 256);
    const started = performance.now();
    multiply(a, a, n);
    const elapsed = performance.now() - started;
    const [cpu] = deviceClaims({ cpuModel: 'here', cpuThreads: 2, gpus: [] });
    expect(judgeTiming(cpu!, elapsed)).toMatchObject({ ok: true });
  });

  it('fails a commitment slower than the band, and one that never came, naming the figures', () => {
    const [, gpu] = deviceClaims(eightH100);
    expect(judgeTiming(gpu!, gpu!.deadlineMs)).toMatchObject({ ok: true });
    expect(judgeTiming(gpu!, 30_000)).toEqual({
      ok: false,
      reason:
        "GPU 0 (NVIDIA H100 80GB HBM3) took 30 s to commit to a 4096×4096 int8 product (2.29 G multiply-adds/s): the H100 band's floor of 100 T multiply-adds/s (uncalibrated) allows 3.18 s",
    });
    expect(judgeTiming(gpu!, undefined)).toEqual({
      ok: false,
      reason:
        "GPU 0 (NVIDIA H100 80GB HBM3) did not commit to a 4096×4096 int8 product within 3.18 s, the time the H100 band's floor of 100 T multiply-adds/s (uncalibrated) allows",
    });
    expect(formatRate(1.2e9)).toBe('1.2 G');
    expect(formatRate(999)).toBe('999');
  });
});

describe('wire encoding', () => {
  it('carries int32 vectors as base64, and refuses what is not one', () => {
    const values = [0, 1, -1, 2 ** 31 - 1, -(2 ** 31), 67_108_858];
    expect(Array.from(decodeInt32(encodeInt32(values))!)).toEqual(values);
    expect(decodeInt32('AAA=')).toBeUndefined();
    expect(decodeInt32('not base64!')).toBeUndefined();
    // 31 revealed rows of n = 4096 in base64: under NATS's 1 MiB default max_payload with room to spare.
    expect(31 * encodeInt32(new Int32Array(4096)).length).toBeLessThan(0.7 * 2 ** 20);
  });
});
