/**
 * The device check (issue 29 item 6), bundled by build.mjs into one file and run by run.sh on a
 * machine with an NVIDIA GPU: the agent's own discovery, runtime and GPU prover against libs/proof's
 * verifier, with this script in the scheduler's place (ProofRounds' steps, without NATS).
 *
 *   1. discovery reads the GPUs (nvidia-smi);
 *   2. all are challenged at once as the scheduler would (deviceClaims: each its band, n, deadline,
 *      memory; every prover ready first, then one start for every window): for each, a runc
 *      container through Tern's runtime gets the GPU and runs tern_prover.py with the machine's
 *      PyTorch, which gets ready (untimed: PyTorch, CUDA, the GPU's memory allocated) before the
 *      seed is drawn; the round passes or fails on memory, on time and on the answer, and a
 *      calibration line gives the measured rate, start and round trip for bands.ts;
 *   3. a claim of 8 GPUs of the model found (or, with none found, of one H100) is challenged the
 *      same way: what discovery did not see is declined, so the claim is not verified.
 *
 * Prints one JSON summary line last; exits 0 when the real GPUs passed and the larger claim did not.
 *
 * `--fake-gpu` (a machine without one, e.g. CI's): the runtime gives the prover's container fake
 * NVIDIA device nodes and discovery "sees" an H100 that is not there (its memory not claimed: there
 * is none to allocate); the prover, let go on without CUDA, computes on the CPU in plain Python,
 * and the check passes when that GPU claim is refused (late for the H100 band) all the same. (NumPy's float64 BLAS on a CPU may not be late: bands.ts says why.)
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { GpuInventory } from '#tern/contracts';
import { askInParts, type DeviceClaim, deviceClaims, judgeMemory, judgeTiming, newChallenge, newProbe, verifyAnswer } from '#tern/proof';
import { GpuInjector, ImageStore, RuncRuntime, silentLogger } from '#tern/runtime';
import { fakeHost } from '../../libs/runtime/src/gpu/fake-host.js';
import { detectGpus, probeContext } from '../../apps/agent/src/discovery/gpu/index.js';
import { GpuProver, proverPython } from '../../apps/agent/src/proof/gpu-prover.js';
import { proverFor } from '../../apps/agent/src/proof/prover-for.js';

interface Round {
  device: string;
  label: string;
  verdict: 'passed' | 'failed' | 'declined';
  reason?: string;
  elapsedMs?: number;
  deadlineMs: number;
  macsPerSecond?: number;
  prover?: GpuProver['committed'];
  ready?: GpuProver['ready'];
}

const fake = process.argv.includes('--fake-gpu');
const runnersDir = process.env.AGENT_RUNNERS_DIR ?? join(process.cwd(), 'runners');
const dir = await mkdtemp(join(tmpdir(), 'tern-device-check-'));
const images = new ImageStore({ root: join(dir, 'images') });
const fakeNodes = fakeHost({
  devices: { '/dev/nvidia0': { major: 195, minor: 0, type: 'c' }, '/dev/nvidiactl': { major: 195, minor: 255, type: 'c' } },
  files: { '/usr/bin/nvidia-smi': '' },
});
const runtime = new RuncRuntime({
  stateDir: join(dir, 'state'),
  images,
  ...(fake ? { gpu: new GpuInjector({ io: fakeNodes, cdiDirs: [] }) } : {}),
});

const FAKE_H100: GpuInventory = { index: 0, vendor: 'nvidia', model: 'NVIDIA H100 80GB HBM3', memoryMiB: 81_559, driverVersion: 'fake' };
const gpus = fake
  ? [FAKE_H100]
  : await detectGpus(probeContext(totalmem()), undefined, (vendor, e) => console.error(`discovery (${vendor}): ${e.message}`));
console.error(`discovery: ${gpus.length ? gpus.map((g) => `GPU ${g.index} ${g.model} ${g.memoryMiB} MiB`).join(', ') : 'no GPU'}`);

/** The GPU prover for a claim, as the agent picks it, or the claim's round when it is declined. */
function proverOf(claim: DeviceClaim, challengeId: string): GpuProver | Round {
  const request = { challengeId, device: claim.device, n: claim.n };
  try {
    return proverFor(
      { ...request, ...(claim.claimedMemoryBytes ? { claimedMemoryBytes: claim.claimedMemoryBytes } : {}) },
      {
        gpus,
        gpuProver: (c, gpu) =>
          new GpuProver(c, {
            runtime,
            runnersDir,
            gpu: { index: gpu.index, ...(gpu.uuid ? { uuid: gpu.uuid } : {}) },
            workDir: join(dir, 'proofs'),
            ...proverPython(),
            ...(fake ? { fakeGpu: true } : {}),
            logger: silentLogger,
          }),
      },
    ) as GpuProver;
  } catch (e) {
    return { device: claim.device, label: claim.label, deadlineMs: claim.deadlineMs, verdict: 'declined', reason: (e as Error).message };
  }
}

/**
 * Every claim's round as the scheduler runs a machine's GPUs (ProofRounds): every prover got ready
 * first, then every seed sent at once, each commitment timed from that one start.
 */
async function proveAll(claims: DeviceClaim[]): Promise<Round[]> {
  // One id per round, named by its prover's container and by its probe alike.
  const ids = claims.map((claim) => `dc-${claim.device.replace(':', '-')}-${Date.now()}`);
  const provers = claims.map((claim, i) => proverOf(claim, ids[i]!));
  try {
    const prepared = await Promise.all(claims.map((claim, i) => prepare(claim, provers[i]!)));
    const started = performance.now();
    return await Promise.all(claims.map((claim, i) => prepared[i] ?? prove(claim, ids[i]!, provers[i] as GpuProver, started)));
  } finally {
    for (const p of provers) if (p instanceof GpuProver) await p.release().catch((e: Error) => console.error(`release: ${e.message}`));
  }
}

/** undefined once the prover is ready with the claimed memory; else the claim's round, failed or declined. */
async function prepare(claim: DeviceClaim, prover: GpuProver | Round): Promise<Round | undefined> {
  if (!(prover instanceof GpuProver)) return prover;
  const base = { device: claim.device, label: claim.label, deadlineMs: claim.deadlineMs };
  try {
    const { allocatedBytes } = await prover.prepare();
    const memory = judgeMemory(claim, allocatedBytes);
    return memory.ok ? undefined : { ...base, verdict: 'failed', reason: memory.reason, ready: prover.ready };
  } catch (e) {
    return { ...base, verdict: 'failed', reason: (e as Error).message, ready: prover.ready };
  }
}

/** The timed challenge from `started`, the probe and the check. */
async function prove(claim: DeviceClaim, challengeId: string, prover: GpuProver, started: number): Promise<Round> {
  const base = { device: claim.device, label: claim.label, deadlineMs: claim.deadlineMs };
  try {
    const challenge = newChallenge(claim.n);
    const root = await Promise.race([
      prover.commit(challenge.seed),
      new Promise<undefined>((r) => setTimeout(() => r(undefined), claim.deadlineMs - (performance.now() - started)).unref()),
    ]);
    const elapsedMs = root === undefined ? undefined : performance.now() - started;
    const timing = judgeTiming(claim, elapsedMs);
    const seen = { elapsedMs, prover: prover.committed, ready: prover.ready };
    if (!timing.ok || root === undefined)
      return { ...base, verdict: 'failed', reason: timing.ok ? 'no commitment' : timing.reason, ...seen };
    const probe = newProbe(challenge);
    // In parts, as the scheduler asks (two at n = 8192): the prover answers each from the product it kept.
    const answer = await askInParts(claim.n, probe, (part) => prover.answer({ challengeId, ...part }));
    if ('wrong' in answer) return { ...base, verdict: 'failed', reason: `${claim.label} ${answer.wrong}`, ...seen };
    const verdict = verifyAnswer(challenge, { root }, probe, answer);
    if (!verdict.ok) return { ...base, verdict: 'failed', reason: verdict.reason, ...seen };
    return { ...base, verdict: 'passed', macsPerSecond: timing.macsPerSecond, ...seen };
  } catch (e) {
    return { ...base, verdict: 'failed', reason: (e as Error).message, prover: prover.committed, ready: prover.ready };
  }
}

function claimsOf(claimed: { index: number; model: string; memoryBytes?: number }[]): DeviceClaim[] {
  return deviceClaims({ cpuModel: null, cpuThreads: null, gpus: claimed }).filter((c) => c.device !== 'cpu');
}

// A real GPU's claim is its memory as discovery read it; the fake one has none to allocate.
const claimedGpus = gpus.map((g) => ({ index: g.index, model: g.model, ...(fake ? {} : { memoryBytes: g.memoryMiB * 2 ** 20 }) }));
const honest = await proveAll(claimsOf(claimedGpus));
const model = gpus[0]?.model ?? 'NVIDIA H100 80GB HBM3';
const larger = await proveAll(claimsOf(Array.from({ length: 8 }, (_, index) => ({ index, model }))));

for (const r of honest.filter((x) => x.prover))
  console.error(
    `calibration: ${r.label} n=${claimsOf(gpus)[0]!.n} ready in ${r.ready?.timings.startMs} ms + ${r.ready?.timings.allocateMs} ms allocating ${r.ready?.allocatedBytes} bytes (untimed); commit ${r.elapsedMs?.toFixed(0)} ms (draw ${r.prover!.timings.drawMs}, product ${r.prover!.timings.productMs}, hash ${r.prover!.timings.hashMs} ms; round trip and transfers the rest) with ${r.prover!.backend}: product alone ${((claimsOf(gpus)[0]!.n ** 3 / r.prover!.timings.productMs) * 1000).toExponential(2)} multiply-adds/s`,
  );
const largerVerified = larger.every((r) => r.verdict === 'passed');
const ok =
  gpus.length > 0 && (fake ? honest.every((r) => r.verdict === 'failed') : honest.every((r) => r.verdict === 'passed')) && !largerVerified;
await rm(dir, { recursive: true, force: true }).catch(() => undefined);
console.log(
  JSON.stringify({
    ok,
    fake,
    gpus: gpus.map((g) => ({ index: g.index, model: g.model, memoryMiB: g.memoryMiB })),
    honest,
    larger: { claimed: `8 × ${model}`, verified: largerVerified, rounds: larger },
  }),
);
process.exit(ok ? 0 : 1);
