import { AGENT_PROOF_CHALLENGE, AGENT_PROOF_PREPARE, AGENT_PROOF_PROBE, type Contract } from '#tern/contracts';
import { type Messaging, RequestError } from '#tern/messaging';
import { deviceClaims, memoryToAllocate, ReferenceProver } from '#tern/proof';
import { ProofRounds } from './proof-rounds.js';

const H100_BYTES = 81_559 * 2 ** 20;
const [cpu, gpu] = deviceClaims({
  cpuModel: 'AMD EPYC 7B13',
  cpuThreads: 16,
  gpus: [{ index: 0, model: 'NVIDIA H100 80GB HBM3', memoryBytes: H100_BYTES }],
});

/** A machine's side of the request subjects: each subject answered by its handler, in the order asked. */
function machine(answers: Partial<Record<string, (payload: Record<string, unknown>) => Promise<unknown>>>) {
  const asked: { subject: string; payload: Record<string, unknown> }[] = [];
  const messaging = {
    request: (contract: Contract, payload: Record<string, unknown>) => {
      asked.push({ subject: contract.subject, payload });
      const answer = answers[contract.subject];
      if (!answer) return Promise.reject(new RequestError(503, 'no responders', contract.subject));
      return answer(payload);
    },
  } as unknown as Messaging;
  return { rounds: new ProofRounds(messaging), asked };
}

describe('a proof round', () => {
  it('gets the prover ready with the claimed memory before the seed exists, and times only the challenge', async () => {
    const { rounds, asked } = machine({
      [AGENT_PROOF_PREPARE.subject]: async () => {
        // Longer than the CPU's whole deadline: it must not count.
        await new Promise((r) => setTimeout(r, cpu!.deadlineMs + 200));
        return {};
      },
      [AGENT_PROOF_CHALLENGE.subject]: (c) =>
        Promise.resolve({ root: new ReferenceProver({ seed: c.seed as string, n: c.n as number }).commitment().root }),
    });
    // The probe is not answered: the round stops there, after the timing was judged (a prepare
    // inside the window would have failed it: "did not commit ... within").
    const result = await rounds.prove('m-1', cpu!);
    expect(result).toEqual({ kind: 'unanswered', reason: 'the machine does not answer hardware challenges (no prover listening)' });
    expect(asked.map((a) => a.subject)).toEqual([AGENT_PROOF_PREPARE.subject, AGENT_PROOF_CHALLENGE.subject, AGENT_PROOF_PROBE.subject]);
    expect(asked[0]!.payload).not.toHaveProperty('seed');
    expect(asked[0]!.payload).toMatchObject({ device: 'cpu', n: 256, deadlineMs: 120_000 });
    expect(asked[0]!.payload).not.toHaveProperty('claimedMemoryBytes');
  });

  it("sends a GPU's claimed memory, and fails a prover that allocated less than it, less the margin", async () => {
    const { rounds, asked } = machine({
      [AGENT_PROOF_PREPARE.subject]: () => Promise.resolve({ allocatedBytes: memoryToAllocate(H100_BYTES) - 1 }),
    });
    expect(await rounds.prove('m-1', gpu!)).toEqual({
      kind: 'failed',
      reason: `GPU 0 (NVIDIA H100 80GB HBM3) claims ${H100_BYTES} bytes of memory, but its prover allocated ${memoryToAllocate(H100_BYTES) - 1} of the ${memoryToAllocate(H100_BYTES)} it must (90 %)`,
    });
    expect(asked.map((a) => a.subject)).toEqual([AGENT_PROOF_PREPARE.subject]);
    expect(asked[0]!.payload).toMatchObject({ device: 'gpu:0', n: 4096, claimedMemoryBytes: H100_BYTES });
  });

  it('fails a device whose prover did not get ready in time, or refused to, naming why; leaves one the agent cannot prove unproven', async () => {
    const timedOut = machine({ [AGENT_PROOF_PREPARE.subject]: () => Promise.reject(new RequestError(504, 'timeout', 'x')) });
    expect(await timedOut.rounds.prove('m-1', gpu!)).toEqual({
      kind: 'failed',
      reason: 'GPU 0 (NVIDIA H100 80GB HBM3): the prover on gpu:0 did not get ready within 120 s',
    });
    const refused = machine({
      [AGENT_PROOF_PREPARE.subject]: () =>
        Promise.reject(new RequestError(500, 'the prover on gpu:0 did not get ready: no CUDA device for a GPU claim', 'x')),
    });
    expect(await refused.rounds.prove('m-1', gpu!)).toEqual({
      kind: 'failed',
      reason: 'GPU 0 (NVIDIA H100 80GB HBM3) refused its challenge: the prover on gpu:0 did not get ready: no CUDA device for a GPU claim',
    });
    const declined = machine({ [AGENT_PROOF_PREPARE.subject]: () => Promise.reject(new RequestError(501, 'discovery saw no GPU 0', 'x')) });
    expect(await declined.rounds.prove('m-1', gpu!)).toMatchObject({ kind: 'unproven' });
  });
});
