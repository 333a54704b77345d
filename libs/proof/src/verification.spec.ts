import { randomInt } from 'node:crypto';
import {
  allowanceMs,
  commitmentDeadlineMs,
  CPU_BAND,
  formatRate,
  GPU_BANDS,
  GPU_CHALLENGE_N,
  GPU_PROVER_ROUND_TRIP_MS,
  gpuBand,
  LARGE_GPU_CHALLENGE_N,
  UNLISTED_GPU_BAND,
} from './bands.js';
import { deviceClaims, judgeMemory, judgeTiming, MEMORY_MARGIN, memoryToAllocate } from './device-claims.js';
import { multiply } from './matrices.js';
import { nextChallengeDelayMs, verificationAfter } from './verification.js';
import { newChallenge, newProbe, PROBE_VECTORS } from './protocol.js';
import { ANSWER_PART_BYTES, decodeInt32, encodeInt32, probeParts } from './wire.js';

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
    expect(claims[1]).toMatchObject({ label: 'GPU 0 (NVIDIA H100 80GB HBM3)', n: 8192, band: { name: 'H100' } });
    // The fastest bands get the larger product; the others keep the one whose answer fits one message.
    expect(deviceClaims({ cpuModel: null, cpuThreads: null, gpus: [{ index: 0, model: 'NVIDIA L4' }] })[1]).toMatchObject({ n: 4096 });
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
    expect(gpu!.deadlineMs).toBe(commitmentDeadlineMs(gpuBand('H100'), 8192));
    expect(gpu!.deadlineMs).toBe(Math.ceil((8192 ** 3 / 100e12) * 1000 + allowanceMs(8192) + GPU_PROVER_ROUND_TRIP_MS));
    expect(gpu!.deadlineMs).toBe(8217);
    // Meeting it on a CPU takes 66.9 G multiply-adds/s, thousands of times one core of the
    // reference prover (a fast many-core BLAS still does it: bands.ts says so).
    expect(8192 ** 3 / (gpu!.deadlineMs / 1000)).toBeGreaterThan(60e9);
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
        "GPU 0 (NVIDIA H100 80GB HBM3) took 30 s to commit to a 8192×8192 int8 product (18.3 G multiply-adds/s): the H100 band's floor of 100 T multiply-adds/s (uncalibrated) allows 8.22 s",
    });
    expect(judgeTiming(gpu!, undefined)).toEqual({
      ok: false,
      reason:
        "GPU 0 (NVIDIA H100 80GB HBM3) did not commit to a 8192×8192 int8 product within 8.22 s, the time the H100 band's floor of 100 T multiply-adds/s (uncalibrated) allows",
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

  it.each([
    [GPU_CHALLENGE_N, 1],
    [LARGE_GPU_CHALLENGE_N, 2],
  ])("splits the probe's answer at n = %i into %i part(s), each fitting one NATS message, every row once", (n, count) => {
    const { rows } = newProbe(newChallenge(n));
    const parts = probeParts(n, rows);
    expect(parts).toHaveLength(count);
    expect(parts.flat()).toEqual(rows);
    for (const part of parts) expect(Buffer.byteLength(answerPart(n, part))).toBeLessThan(2 ** 20 - 100_000);
    // One row more in a part would pass the budget: the parts are as few as they can be.
    if (count > 1) expect(Buffer.byteLength(answerPart(n, [...parts[0]!, 0]))).toBeGreaterThan(ANSWER_PART_BYTES);
  });
});

/** A part of a probe's answer as the agent sends it, with values of every size. */
function answerPart(n: number, rows: number[]): string {
  const vector = () => encodeInt32(Int32Array.from({ length: n }, () => randomInt(-(2 ** 31), 2 ** 31)));
  const depth = Math.ceil(Math.log2(n));
  return JSON.stringify({
    products: Array.from({ length: PROBE_VECTORS }, vector),
    rows: rows.map((index) => ({ index, values: vector(), proof: Array<string>(depth).fill('f'.repeat(64)) })),
  });
}
