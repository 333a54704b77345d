import { once } from 'node:events';
import { Worker } from 'node:worker_threads';
import type { HardwareAnswer, HardwareProbe } from '#tern/contracts';
import type { Prover, ProverReady, ProverRequest } from './prover.js';

/** What the worker posts first. */
export interface CpuProverCommitted {
  root: string;
}

/** What the worker is asked next: the probe, or a part of it, as it came. */
export type CpuProverAsk = Pick<HardwareProbe, 'vectors' | 'rows'>;

/**
 * Proves on this machine's CPU: the reference prover of libs/proof in a worker thread, so the
 * agent's heartbeats and commands go on while it multiplies. One thread: the challenge proves
 * that a CPU computes at the CPU band's floor, not how many threads it has. Nothing to get ready:
 * the thread starts with the seed, inside the CPU band's allowance.
 */
export class CpuProver implements Prover {
  private worker?: Worker;
  private failed?: Promise<never>;

  constructor(private readonly request: Pick<ProverRequest, 'n'>) {}

  prepare(): Promise<ProverReady> {
    return Promise.resolve({});
  }

  async commit(seed: string): Promise<string> {
    const worker = new Worker(new URL('./cpu-prover.worker.js', import.meta.url), { workerData: { seed, n: this.request.n } });
    this.worker = worker;
    this.failed = Promise.race([
      once(worker, 'error').then(([e]) => Promise.reject(e as Error)),
      once(worker, 'exit').then(([code]) => Promise.reject(new Error(`the prover's thread ended (${String(code)})`))),
    ]);
    // Seen by whichever of commit() and answer() is waiting; never unhandled when neither is.
    this.failed.catch(() => undefined);
    const [message] = (await Promise.race([once(worker, 'message'), this.failed])) as [CpuProverCommitted];
    return message.root;
  }

  async answer(probe: HardwareProbe): Promise<HardwareAnswer> {
    if (!this.worker || !this.failed) throw new Error('the prover has not committed');
    const reply = Promise.race([once(this.worker, 'message'), this.failed]);
    this.worker.postMessage({ vectors: probe.vectors, rows: probe.rows } satisfies CpuProverAsk);
    const [message] = (await reply) as [HardwareAnswer];
    return message;
  }

  async release(): Promise<void> {
    await this.worker?.terminate();
  }
}
