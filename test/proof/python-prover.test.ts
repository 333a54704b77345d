import { type ChildProcessByStdio, spawn } from 'node:child_process';
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Readable, Writable } from 'node:stream';
import { promisify } from 'node:util';
import {
  challengeMatrices,
  decodeInt32,
  deviceClaims,
  encodeInt32,
  judgeTiming,
  newChallenge,
  newProbe,
  type ProofAnswer,
  ReferenceProver,
  verifyAnswer,
} from '#tern/proof';
import { ProverChannel, ProverFailed } from '../../apps/agent/src/proof/prover-channel.js';

// runners/python/tern_prover.py, the GPU prover's Python, run here as a real process on its CPU
// paths: it must draw the same matrices and commit to the same root as libs/proof, and its
// answers must pass (and corrupted ones fail) libs/proof's verifier.
const PROVER = join(import.meta.dirname, '../../runners/python/tern_prover.py');
/** A PyTorch stand-in with one CUDA device of FAKE_TORCH_DEVICE_BYTES: the prepare step's CUDA path without a GPU. */
const FAKE_TORCH = join(import.meta.dirname, 'fake-torch');
const GIB = 2 ** 30;
const run = promisify(execFile);

type Python = ChildProcessByStdio<Writable, Readable, Readable>;

function startProver(product: 'python' | 'numpy' | '' = 'python', env: NodeJS.ProcessEnv = {}): { child: Python; channel: ProverChannel } {
  const child = spawn('python3', [PROVER], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, TERN_PROVER_PRODUCT: product, TERN_PROVER_FAKE_GPU: '', ...env },
  });
  let stderr = '';
  child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
  const channel = new ProverChannel(child.stdout, child.stdin, async () => {
    if (child.exitCode === null) await once(child, 'exit');
    return `exit ${child.exitCode}: ${stderr.slice(-400)}`;
  });
  return { child, channel };
}

function decoded(reply: { products: string[]; rows: { index: number; values: string; proof: string[] }[] }): ProofAnswer {
  return {
    products: reply.products.map((p) => Array.from(decodeInt32(p)!)),
    rows: reply.rows.map((r) => ({ index: r.index, values: Array.from(decodeInt32(r.values)!), proof: r.proof })),
  };
}

describe('the Python prover (runners/python/tern_prover.py)', () => {
  it.each([31, 64, 100])('draws the same A and B as libs/proof (n = %i), with its fastest AES and with AES in plain Python', async (n) => {
    for (let i = 0; i < 3; i++) {
      const { seed } = newChallenge(n);
      const { a, b } = challengeMatrices(Buffer.from(seed, 'hex'), n);
      const expected = Buffer.concat([
        Buffer.from(a.buffer, a.byteOffset, a.length),
        Buffer.from(b.buffer, b.byteOffset, b.length),
      ]).toString('hex');
      for (const aes of [[], ['--aes', 'python']]) {
        const { stdout } = await run('python3', [PROVER, 'matrices', seed, String(n), ...aes]);
        expect(stdout.trim()).toBe(expected);
      }
    }
  });

  it.each(['python', 'numpy'] as const)(
    'commits to the root libs/proof commits to, and its answer verifies (%s product)',
    async (product) => {
      for (const n of [31, 48, 97]) {
        const challenge = newChallenge(n);
        const { child, channel } = startProver(product);
        const committed = await channel.commit(challenge);
        expect(committed.root).toBe(new ReferenceProver(challenge).commitment().root);
        const probe = newProbe(challenge);
        const reply = await channel.answer({ vectors: probe.vectors.map((v) => encodeInt32(v)), rows: probe.rows });
        expect(verifyAnswer(challenge, { root: committed.root }, probe, decoded(reply))).toEqual({ ok: true });
        await once(child, 'exit');
        expect(child.exitCode).toBe(0);
      }
    },
  );

  it('answers a probe in parts from the product it kept, and ends after the last part', async () => {
    const challenge = newChallenge(64);
    const { child, channel } = startProver();
    const { root } = await channel.commit(challenge);
    const probe = newProbe(challenge);
    const vectors = probe.vectors.map((v) => encodeInt32(v));
    const first = await channel.answer({ vectors, rows: probe.rows.slice(0, 16), more: true });
    expect(child.exitCode).toBeNull();
    const last = await channel.answer({ vectors, rows: probe.rows.slice(16) });
    expect(last.products).toEqual(first.products);
    expect(verifyAnswer(challenge, { root }, probe, decoded({ products: first.products, rows: [...first.rows, ...last.rows] }))).toEqual({
      ok: true,
    });
    await once(child, 'exit');
    expect(child.exitCode).toBe(0);
  });

  it('gives an answer that, corrupted in any part, the verifier refuses', async () => {
    const challenge = newChallenge(64);
    const { channel } = startProver();
    const { root } = await channel.commit(challenge);
    const probe = newProbe(challenge);
    const answer = decoded(await channel.answer({ vectors: probe.vectors.map((v) => encodeInt32(v)), rows: probe.rows }));
    const corrupt = (change: (a: ProofAnswer) => void): ProofAnswer => {
      const copy = structuredClone(answer);
      change(copy);
      return copy;
    };
    const refusals = [
      corrupt((a) => (a.products[0]![5] = (a.products[0]![5]! + 1) % 67_108_859)),
      corrupt((a) => (a.rows[0]!.values[0]! += 1)),
      corrupt((a) => a.rows[1]!.proof.reverse()),
      corrupt((a) => (a.rows[2]!.index = (a.rows[2]!.index + 1) % 64)),
    ].map((bad) => verifyAnswer(challenge, { root }, probe, bad));
    expect(refusals.map((r) => r.ok)).toEqual([false, false, false, false]);
    // And a root that is not the one it computed: every revealed row fails against it.
    expect(verifyAnswer(challenge, { root: 'ab'.repeat(32) }, probe, answer)).toMatchObject({
      ok: false,
      reason: expect.stringMatching(/not the committed one/),
    });
  });

  it('refuses a malformed challenge with a reason, not a crash', async () => {
    const { child, channel } = startProver();
    await expect(channel.commit({ seed: 'zz', n: 64 })).rejects.toThrow(
      new ProverFailed('the prover refused: ValueError: seed must be 64 hex digits'),
    );
    await once(child, 'exit');
    expect(child.exitCode).toBe(1);
  });

  it.each([
    ['python', /TERN_PROVER_PRODUCT=python rules out PyTorch/],
    ['numpy', /TERN_PROVER_PRODUCT=numpy rules out PyTorch/],
    ['', /PyTorch does not import|sees no CUDA device/],
  ] as const)('refuses to get ready for a GPU claim without CUDA (product %j), saying why', async (product, why) => {
    const { child, channel } = startProver(product);
    const failed = channel.prepare({ n: 64, allocateBytes: 9 * 2 ** 30, claimedBytes: 10 * 2 ** 30 });
    await expect(failed).rejects.toThrow(ProverFailed);
    await expect(failed).rejects.toThrow(
      /^the prover refused: RuntimeError: no CUDA device for a GPU claim: .*; a CPU cannot prove a GPU$/,
    );
    await expect(failed).rejects.toThrow(why);
    await once(child, 'exit');
    expect(child.exitCode).toBe(1);
  });

  it('gets ready without CUDA only for the device check’s fake GPU, then commits to the seed sent after', async () => {
    const { child, channel } = startProver('python', { TERN_PROVER_FAKE_GPU: '1' });
    const ready = await channel.prepare({ n: 64, allocateBytes: 0, claimedBytes: 0 });
    expect(ready).toMatchObject({ ready: true, backend: 'python (fake GPU)', allocatedBytes: 0 });
    const challenge = newChallenge(64);
    expect((await channel.commit(challenge)).root).toBe(new ReferenceProver(challenge).commitment().root);
    child.kill('SIGKILL');
  });

  it('allocates the memory it is asked for on a CUDA device, and says so', async () => {
    const { child, channel } = startProver('', { PYTHONPATH: FAKE_TORCH, FAKE_TORCH_DEVICE_BYTES: String(4 * GIB) });
    const ready = await channel.prepare({ n: 64, allocateBytes: 3 * GIB, claimedBytes: Math.floor((3 * GIB) / 0.9) });
    expect(ready).toMatchObject({ ready: true, backend: 'torch-cuda (NVIDIA Fake 4GB)' });
    expect(ready.allocatedBytes).toBeGreaterThanOrEqual(3 * GIB);
    child.kill('SIGKILL');
  });

  it('counts what a workload holds on the device, and allocates the rest of the claim', async () => {
    const { child, channel } = startProver('', {
      PYTHONPATH: FAKE_TORCH,
      FAKE_TORCH_DEVICE_BYTES: String(4 * GIB),
      FAKE_TORCH_OTHERS_BYTES: String(2 * GIB),
    });
    const ready = await channel.prepare({ n: 64, allocateBytes: 3 * GIB, claimedBytes: Math.floor((3 * GIB) / 0.9) });
    expect(ready).toMatchObject({ ready: true, heldByOthersBytes: 2 * GIB });
    expect(ready.allocatedBytes).toBeGreaterThanOrEqual(3 * GIB);
    child.kill('SIGKILL');
  });

  it('refuses to get ready on a CUDA device smaller than the claim, naming the claimed and the allocated bytes', async () => {
    const { child, channel } = startProver('', { PYTHONPATH: FAKE_TORCH, FAKE_TORCH_DEVICE_BYTES: String(4 * GIB) });
    await expect(channel.prepare({ n: 64, allocateBytes: 9 * GIB, claimedBytes: 10 * GIB })).rejects.toThrow(
      new ProverFailed(
        `the prover refused: RuntimeError: NVIDIA Fake 4GB claims ${10 * GIB} bytes of memory; the prover allocated ${3 * GIB + 64 * 64} bytes (0 more held by CUDA contexts and other processes) of the ${9 * GIB} it must`,
      ),
    );
    await once(child, 'exit');
    expect(child.exitCode).toBe(1);
  });

  it('refuses a malformed prepare step with a reason', async () => {
    const { child, channel } = startProver('python', { TERN_PROVER_FAKE_GPU: '1' });
    await expect(channel.prepare({ n: 0, allocateBytes: 0, claimedBytes: 0 })).rejects.toThrow(
      new ProverFailed('the prover refused: ValueError: n must be a whole number in [1, 131072]'),
    );
    await once(child, 'exit');
    expect(child.exitCode).toBe(1);
  });

  it('misses an H100 claim’s deadline when it computes on the CPU: the plain-Python path proves no GPU', async () => {
    const [, gpu] = deviceClaims({ cpuModel: null, cpuThreads: null, gpus: [{ index: 0, model: 'NVIDIA H100 80GB HBM3' }] });
    const challenge = newChallenge(gpu!.n);
    const { child, channel } = startProver();
    const started = performance.now();
    const committed = channel.commit(challenge).then(() => performance.now() - started);
    const late = new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), gpu!.deadlineMs));
    const elapsed = await Promise.race([committed, late]);
    child.kill('SIGKILL');
    committed.catch(() => undefined);
    const verdict = judgeTiming(gpu!, elapsed);
    expect(verdict).toMatchObject({
      ok: false,
      reason: expect.stringMatching(/^GPU 0 \(NVIDIA H100 80GB HBM3\) did not commit to a 8192×8192 int8 product within/),
    });
  }, 60_000);
});
