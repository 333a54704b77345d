import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import type { HardwareAnswer, HardwareChallenge, HardwareProbe } from '#tern/contracts';

/** The Python prover's commitment line (runners/python/tern_prover.py). */
export interface PythonProverCommitted {
  root: string;
  /** What computed C: `torch._int_mm`, `torch float64`, `numpy`, `python`. */
  backend: string;
  aes: string;
  timings: { drawMs: number; productMs: number; hashMs: number };
}

/** The Python prover's line once ready (runners/python/tern_prover.py), before any seed. */
export interface PythonProverReady {
  /** What will compute C: `torch-cuda (<device name>)`, or `python (fake GPU)` in the device check's fake mode. */
  backend: string;
  /** Device memory allocated and touched, with heldByOthersBytes: together at most the device's memory. */
  allocatedBytes: number;
  /** What the device held for CUDA contexts and other processes (a workload on the GPU) when the prover allocated. */
  heldByOthersBytes?: number;
  timings: { startMs: number; allocateMs: number };
}

/** A refusal or a crash of the prover, with its words. */
export class ProverFailed extends Error {}

/**
 * The agent's end of the exchange with the Python prover: one JSON object a line, the prepare
 * step, the challenge, then the probe (in one part or several), each answered once. Over a unix
 * socket (a prover in a container) or a child's stdio (tests); either way the prover is a stranger
 * to parse, never to trust.
 */
export class ProverChannel {
  private readonly lines: AsyncIterator<string>;

  constructor(
    input: Readable,
    private readonly output: Writable,
    /** Why the stream ended, when it does early (the container's exit and stderr). */
    private readonly whyEnded: () => Promise<string>,
  ) {
    this.lines = createInterface({ input, crlfDelay: Infinity })[Symbol.asyncIterator]();
  }

  /** Gets the prover ready for an n×n product, allocating `allocateBytes` of device memory (the claim less the margin) and naming `claimedBytes` when it cannot. */
  async prepare(request: { n: number; allocateBytes: number; claimedBytes: number }): Promise<PythonProverReady> {
    const reply = await this.exchange({ prepare: request });
    if (reply.ready !== true || typeof reply.allocatedBytes !== 'number') throw new ProverFailed('the prover did not say it was ready');
    return reply as unknown as PythonProverReady;
  }

  async commit(challenge: Pick<HardwareChallenge, 'seed' | 'n'>): Promise<PythonProverCommitted> {
    const reply = await this.exchange({ seed: challenge.seed, n: challenge.n });
    if (typeof reply.root !== 'string' || !/^[0-9a-f]{64}$/.test(reply.root))
      throw new ProverFailed('the prover committed to no sha256 root');
    return reply as unknown as PythonProverCommitted;
  }

  /** Answers the probe, or a part of it (`more`: another part follows, from the same product). */
  async answer(probe: Pick<HardwareProbe, 'vectors' | 'rows' | 'more'>): Promise<HardwareAnswer> {
    const reply = await this.exchange({ vectors: probe.vectors, rows: probe.rows, ...(probe.more ? { more: true } : {}) });
    if (!Array.isArray(reply.products) || !Array.isArray(reply.rows)) throw new ProverFailed('the prover answered no products and rows');
    // The scheduler validates the answer's shape and checks every value; the agent passes it on.
    return { products: reply.products as string[], rows: reply.rows as HardwareAnswer['rows'] };
  }

  private async exchange(message: object): Promise<Record<string, unknown>> {
    this.output.write(`${JSON.stringify(message)}\n`);
    const next = await this.lines.next();
    if (next.done) throw new ProverFailed(`the prover ended without answering: ${await this.whyEnded()}`);
    let reply: unknown;
    try {
      reply = JSON.parse(next.value);
    } catch {
      throw new ProverFailed(`the prover answered a line that is not JSON: ${next.value.slice(0, 200)}`);
    }
    if (typeof reply !== 'object' || reply === null || Array.isArray(reply))
      throw new ProverFailed('the prover answered something other than an object');
    const fields = reply as Record<string, unknown>;
    if (typeof fields.error === 'string') throw new ProverFailed(`the prover refused: ${fields.error}`);
    return fields;
  }
}
