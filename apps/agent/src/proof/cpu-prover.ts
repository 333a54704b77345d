import { once } from 'node:events';
import { Worker } from 'node:worker_threads';
import type { HardwareAnswer, HardwareChallenge, HardwareProbe } from '#tern/contracts';
import type { Prover } from './prover.js';

/** What the worker posts first. */
export interface CpuProverCommitted {
  root: string;
}

/** What the worker is asked second: the probe, as it came. */
export type CpuProverAsk = Pick<HardwareProbe, 'vectors' | 'rows'>;

/**
 * Proves on this machine's CPU: the reference prover of libs/proof in a worker thread, so the
 * agent's heartbeats and commands go on while it multiplies. One thread: the challenge proves
 * that a CPU computes at the CPU band's floor, not how many threads it has.
 */
export class CpuProver implements Prover {
  private readonly worker: Worker;
  private readonly failed: Promise<never>;

  constructor(challenge: Pick<HardwareChallenge, 'seed' | 'n'>) {
    this.worker = new Worker(new URL('./cpu-prover.worker.js', import.meta.url), { workerData: { seed: challenge.seed, n: challenge.n } });
    this.failed = Promise.race([
      once(this.worker, 'error').then(([e]) => Promise.reject(e as Error)),
      once(this.worker, 'exit').then(([code]) => Promise.reject(new Error(`the prover's thread ended (${String(code)})`))),
    ]);
    // Seen by whichever of commit() and answer() is waiting; never unhandled when neither is.
    this.failed.catch(() => undefined);
  }

  async commit(): Promise<string> {
    const [message] = (await Promise.race([once(this.worker, 'message'), this.failed])) as [CpuProverCommitted];
    return message.root;
  }

  async answer(probe: HardwareProbe): Promise<HardwareAnswer> {
    const reply = Promise.race([once(this.worker, 'message'), this.failed]);
    this.worker.postMessage({ vectors: probe.vectors, rows: probe.rows } satisfies CpuProverAsk);
    const [message] = (await reply) as [HardwareAnswer];
    return message;
  }

  async release(): Promise<void> {
    await this.worker.terminate();
  }
}
