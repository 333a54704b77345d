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
const run = promisify(execFile);

type Python = ChildProcessByStdio<Writable, Readable, Readable>;

function startProver(product: 'python' | 'numpy' = 'python'): { child: Python; channel: ProverChannel } {
  const child = spawn('python3', [PROVER], { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, TERN_PROVER_PRODUCT: product } });
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
      reason: expect.stringMatching(/^GPU 0 \(NVIDIA H100 80GB HBM3\) did not commit to a 4096×4096 int8 product within/),
    });
  }, 60_000);
});
