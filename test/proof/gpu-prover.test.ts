import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { decodeInt32, encodeInt32, newChallenge, newProbe, ReferenceProver, verifyAnswer } from '#tern/proof';
import { GpuInjector, silentLogger } from '#tern/runtime';
import { GpuProver } from '../../apps/agent/src/proof/gpu-prover.js';
import { fakeHost } from '../../libs/runtime/src/gpu/fake-host.js';
import { RuntimeSandbox } from '../runtime/support.js';
import { describeNeeding } from '../support/real-parts.js';

const describeWithRunc = await describeNeeding(['root', 'runc', 'python3']);
const RUNNERS = join(import.meta.dirname, '../../runners');

// The GPU prover's whole path on a machine without a GPU: the runtime gives the container a
// fake GPU (NVIDIA device nodes, no driver), as it gives a real one to workloads, and the prover
// inside computes on the CPU (no PyTorch in the host image here) where it is told the GPU is fake,
// and refuses to get ready otherwise.
describeWithRunc('GpuProver in a runc container on a (fake) GPU', () => {
  let sandbox: RuntimeSandbox;
  beforeAll(async () => {
    const io = fakeHost({
      devices: { '/dev/nvidia0': { major: 195, minor: 0, type: 'c' }, '/dev/nvidiactl': { major: 195, minor: 255, type: 'c' } },
      files: { '/usr/bin/nvidia-smi': '' },
    });
    sandbox = await RuntimeSandbox.create({ gpu: new GpuInjector({ io, cdiDirs: [] }) });
  });
  afterAll(() => sandbox.destroy());

  const proverOf = (
    challenge: { challengeId: string; n: number; claimedMemoryBytes?: number },
    { python, fakeGpu = true }: { python?: string; fakeGpu?: boolean } = {},
  ) =>
    new GpuProver(challenge, {
      runtime: sandbox.runtime,
      runnersDir: RUNNERS,
      gpu: { index: 0 },
      workDir: join(sandbox.dir, 'proofs'),
      ...(python ? { python } : {}),
      fakeGpu,
      logger: silentLogger,
    });

  it('gets ready, commits over its socket to the seed sent after, answers a probe that verifies, and leaves no container or socket behind', async () => {
    const challenge = { challengeId: 'gpu-ok', ...newChallenge(64) };
    const prover = proverOf(challenge);
    try {
      expect(await prover.prepare()).toEqual({ allocatedBytes: 0 });
      expect(prover.ready?.backend).toMatch(/^(python|numpy) \(fake GPU\)$/);
      const root = await prover.commit(challenge.seed);
      expect(root).toBe(new ReferenceProver(challenge).commitment().root);
      expect(prover.committed?.backend).toMatch(/^(python|numpy)$/);
      expect((await sandbox.runtime.list()).map((c) => c.labels)).toEqual([{ 'tern.proof.challenge': 'gpu-ok' }]);
      const probe = newProbe(challenge);
      const reply = await prover.answer({ challengeId: 'gpu-ok', vectors: probe.vectors.map((v) => encodeInt32(v)), rows: probe.rows });
      const answer = {
        products: reply.products.map((p) => Array.from(decodeInt32(p)!)),
        rows: reply.rows.map((r) => ({ index: r.index, values: Array.from(decodeInt32(r.values)!), proof: r.proof })),
      };
      expect(verifyAnswer(challenge, { root }, probe, answer)).toEqual({ ok: true });
    } finally {
      await prover.release();
    }
    expect(await sandbox.runtime.list()).toEqual([]);
    expect(await readdir(join(sandbox.dir, 'proofs'))).toEqual([]);
  });

  it('refuses to get ready for a GPU it has no CUDA for, naming why, before any seed', async () => {
    const prover = proverOf({ challengeId: 'gpu-nocuda', n: 64, claimedMemoryBytes: 80 * 2 ** 30 }, { fakeGpu: false });
    try {
      await expect(prover.prepare()).rejects.toThrow(
        /^the prover refused: RuntimeError: no CUDA device for a GPU claim: PyTorch (does not import|.* sees no CUDA device).*; a CPU cannot prove a GPU$/,
      );
    } finally {
      await prover.release();
    }
    expect(await sandbox.runtime.list()).toEqual([]);
  });

  it('says why when its container ends before connecting', async () => {
    const prover = proverOf({ challengeId: 'gpu-bad', n: 64 }, { python: '/usr/bin/false' });
    try {
      await expect(prover.prepare()).rejects.toThrow(/the prover's container exited before connecting: exit 1/);
    } finally {
      await prover.release();
    }
    expect(await sandbox.runtime.list()).toEqual([]);
  });
});
