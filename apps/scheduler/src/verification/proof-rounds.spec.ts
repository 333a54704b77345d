import { AGENT_PROOF_CHALLENGE, AGENT_PROOF_PREPARE, AGENT_PROOF_PROBE, type Contract } from '#tern/contracts';
import { type Messaging, RequestError } from '#tern/messaging';
import {
  decodeInt32,
  type DeviceClaim,
  deviceClaims,
  encodeInt32,
  memoryToAllocate,
  merkleLevels,
  merkleProof,
  merkleRoot,
  ReferenceProver,
  rowLeaf,
} from '#tern/proof';
import { AnswerChecker } from './answer-checker.js';
import { ProofRounds } from './proof-rounds.js';

/** The built worker (npm test builds first): jest runs the checker from its .ts source. */
const BUILT_WORKER = new URL('../../../../dist/apps/scheduler/src/verification/answer-check.worker.js', import.meta.url);

const H100_BYTES = 81_559 * 2 ** 20;
const [cpu, gpu] = deviceClaims({
  cpuModel: 'AMD EPYC 7B13',
  cpuThreads: 16,
  gpus: [{ index: 0, model: 'NVIDIA H100 80GB HBM3', memoryBytes: H100_BYTES }],
});

/**
 * A machine's side of the request subjects: each subject answered by its handler, in the order
 * asked; a reply later than the request's timeoutMs is a 504, as Messaging's.
 */
function machine(answers: Partial<Record<string, (payload: Record<string, unknown>) => Promise<unknown>>>) {
  const asked: { subject: string; payload: Record<string, unknown> }[] = [];
  const messaging = {
    request: (contract: Contract, payload: Record<string, unknown>, { timeoutMs }: { timeoutMs: number }) => {
      asked.push({ subject: contract.subject, payload });
      const answer = answers[contract.subject];
      if (!answer) return Promise.reject(new RequestError(503, 'no responders', contract.subject));
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new RequestError(504, 'timeout', contract.subject)), timeoutMs);
      });
      return Promise.race([answer(payload), late]).finally(() => clearTimeout(timer));
    },
  } as unknown as Messaging;
  return { rounds: new ProofRounds(messaging, new AnswerChecker(BUILT_WORKER)), asked };
}

/**
 * A machine with GPUs that answers each challenge honestly after `workMs` on a device: on a device
 * of each GPU (`devices: 'one each'`), or on one device shared by all, one product after another.
 */
function gpuMachine(workMs: number, devices: 'one each' | 'one for all') {
  const held = new Map<string, ReferenceProver>();
  let device = Promise.resolve();
  const onDevice = (): Promise<void> => {
    if (devices === 'one each') return new Promise((r) => setTimeout(r, workMs));
    device = device.then(() => new Promise((r) => setTimeout(r, workMs)));
    return device;
  };
  const answered = machine({
    [AGENT_PROOF_PREPARE.subject]: () => Promise.resolve({}),
    [AGENT_PROOF_CHALLENGE.subject]: async (c) => {
      await onDevice();
      const prover = new ReferenceProver({ seed: c.seed as string, n: c.n as number });
      held.set(c.challengeId as string, prover);
      return { root: prover.commitment().root };
    },
    [AGENT_PROOF_PROBE.subject]: (p) => {
      const a = held.get(p.challengeId as string)!.answer({
        vectors: (p.vectors as string[]).map((v) => Array.from(decodeInt32(v)!)),
        rows: p.rows as number[],
      });
      return Promise.resolve({
        products: a.products.map((y) => encodeInt32(y)),
        rows: a.rows.map((r) => ({ index: r.index, values: encodeInt32(r.values), proof: r.proof })),
      });
    },
  });
  // Lets the shared device's last product finish before the test ends.
  return { ...answered, idle: () => device };
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
    const [result] = await rounds.prove('m-1', [cpu!]);
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
    expect(await rounds.prove('m-1', [gpu!])).toEqual([
      {
        kind: 'failed',
        reason: `GPU 0 (NVIDIA H100 80GB HBM3) claims ${H100_BYTES} bytes of memory, but its prover allocated ${memoryToAllocate(H100_BYTES) - 1} of the ${memoryToAllocate(H100_BYTES)} it must (90 %)`,
      },
    ]);
    expect(asked.map((a) => a.subject)).toEqual([AGENT_PROOF_PREPARE.subject]);
    expect(asked[0]!.payload).toMatchObject({ device: 'gpu:0', n: 8192, claimedMemoryBytes: H100_BYTES });
  });

  it('fails a device whose prover did not get ready in time, or refused to, naming why; leaves one the agent cannot prove unproven', async () => {
    const timedOut = machine({ [AGENT_PROOF_PREPARE.subject]: () => Promise.reject(new RequestError(504, 'timeout', 'x')) });
    expect(await timedOut.rounds.prove('m-1', [gpu!])).toEqual([
      {
        kind: 'failed',
        reason: 'GPU 0 (NVIDIA H100 80GB HBM3): the prover on gpu:0 did not get ready within 120 s',
      },
    ]);
    const refused = machine({
      [AGENT_PROOF_PREPARE.subject]: () =>
        Promise.reject(new RequestError(500, 'the prover on gpu:0 did not get ready: no CUDA device for a GPU claim', 'x')),
    });
    expect(await refused.rounds.prove('m-1', [gpu!])).toEqual([
      {
        kind: 'failed',
        reason:
          'GPU 0 (NVIDIA H100 80GB HBM3) refused its challenge: the prover on gpu:0 did not get ready: no CUDA device for a GPU claim',
      },
    ]);
    const declined = machine({ [AGENT_PROOF_PREPARE.subject]: () => Promise.reject(new RequestError(501, 'discovery saw no GPU 0', 'x')) });
    expect(await declined.rounds.prove('m-1', [gpu!])).toMatchObject([{ kind: 'unproven' }]);
    // An agent that takes fewer challenges at once than the machine has GPUs (one from before they
    // were challenged together): unproven, not quarantined for its age.
    const older = machine({
      [AGENT_PROOF_PREPARE.subject]: () => Promise.reject(new RequestError(429, '2 challenges are under way already', 'x')),
    });
    expect(await older.rounds.prove('m-1', [gpu!])).toEqual([
      { kind: 'unproven', reason: 'GPU 0 (NVIDIA H100 80GB HBM3) is unproven: 2 challenges are under way already' },
    ]);
  });

  it('challenges every GPU at once from one start: one device answering two claims in turn misses the window, two side by side pass', async () => {
    // Two claimed H100s, each challenge small enough for this process to answer and check, with a
    // window of 3 s; each product takes 1.8 s on its device.
    const gpus = deviceClaims({
      cpuModel: null,
      cpuThreads: null,
      gpus: [0, 1].map((index) => ({ index, model: 'NVIDIA H100 80GB HBM3' })),
    })
      .slice(1)
      .map((claim): DeviceClaim => ({ ...claim, n: 64, deadlineMs: 3000 }));

    const honest = gpuMachine(1800, 'one each');
    const results = await honest.rounds.prove('m-1', gpus);
    expect(results).toEqual([
      { kind: 'passed', macsPerSecond: expect.any(Number) },
      { kind: 'passed', macsPerSecond: expect.any(Number) },
    ]);
    // Both seeds went out before either commitment came back, each its own.
    const challenges = honest.asked.filter((a) => a.subject === AGENT_PROOF_CHALLENGE.subject);
    expect(honest.asked.map((a) => a.subject).slice(2, 4)).toEqual([AGENT_PROOF_CHALLENGE.subject, AGENT_PROOF_CHALLENGE.subject]);
    expect(challenges[0]!.payload.seed).not.toBe(challenges[1]!.payload.seed);

    // One real device: the second product starts when the first is done, 3.6 s after the start.
    const pretender = gpuMachine(1800, 'one for all');
    const [first, second] = await pretender.rounds.prove('m-2', gpus);
    await pretender.idle();
    expect(first).toMatchObject({ kind: 'passed' });
    expect(second).toEqual({
      kind: 'failed',
      reason:
        "GPU 1 (NVIDIA H100 80GB HBM3) did not commit to a 64×64 int8 product within 3.00 s, the time the H100 band's floor of 100 T multiply-adds/s (uncalibrated) allows",
    });
  }, 30_000);

  it("asks for an H100's 8192 probe in parts that each fit one NATS message, and checks the rows of all of them", async () => {
    // A product of zeros, committed to honestly: its rows pass against the root and the products,
    // so the check gets as far as A·B, which it is not.
    const n = gpu!.n;
    const zeros = encodeInt32(new Int32Array(n));
    const levels = merkleLevels(Array.from({ length: n }, (_, i) => rowLeaf(i, new Int32Array(n))));
    const zeroMachine = (secondProducts: string) => {
      const parts: { rows: number[]; more?: unknown }[] = [];
      const { rounds } = machine({
        [AGENT_PROOF_PREPARE.subject]: () => Promise.resolve({ allocatedBytes: H100_BYTES }),
        [AGENT_PROOF_CHALLENGE.subject]: () => Promise.resolve({ root: merkleRoot(levels).toString('hex') }),
        [AGENT_PROOF_PROBE.subject]: (p) => {
          parts.push({ rows: p.rows as number[], more: p.more });
          return Promise.resolve({
            products: [zeros, parts.length > 1 ? secondProducts : zeros],
            rows: parts.at(-1)!.rows.map((index) => ({
              index,
              values: zeros,
              proof: merkleProof(levels, index).map((h) => h.toString('hex')),
            })),
          });
        },
      });
      return { rounds, parts };
    };

    const whole = zeroMachine(zeros);
    expect(await whole.rounds.prove('m-1', [gpu!])).toEqual([
      { kind: 'failed', reason: 'GPU 0 (NVIDIA H100 80GB HBM3): the product is not A·B' },
    ]);
    expect(whole.parts.map((p) => p.more)).toEqual([true, undefined]);
    expect(whole.parts.flatMap((p) => p.rows)).toHaveLength(31);

    const changing = zeroMachine(encodeInt32(new Int32Array(n).fill(1)));
    expect(await changing.rounds.prove('m-1', [gpu!])).toEqual([
      { kind: 'failed', reason: 'GPU 0 (NVIDIA H100 80GB HBM3) answered the parts of one probe with different products' },
    ]);
  }, 60_000);
});
