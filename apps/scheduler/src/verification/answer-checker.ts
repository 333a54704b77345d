import { once } from 'node:events';
import { Worker } from 'node:worker_threads';
import type { ProofAnswer, ProofChallenge, ProofCommitment, ProofProbe, ProofVerdict } from '#tern/proof';

/** The worker's script, beside this module once built. */
export const ANSWER_CHECK_WORKER = new URL('./answer-check.worker.js', import.meta.url);

/** What one check needs: the challenge sent, the commitment and the probe, and the machine's answer. */
export interface AnswerToCheck {
  challenge: ProofChallenge;
  commitment: ProofCommitment;
  probe: ProofProbe;
  answer: ProofAnswer;
}

/**
 * Checks a proof's answer (libs/proof verifyAnswer) in a worker thread of its own: at a GPU's n the
 * check draws A and B (2n² bytes of AES) and runs two Freivalds passes, over a second of CPU on a
 * small control plane, and a machine's GPUs are checked together. On the event loop that would
 * stall the scheduler's heartbeats, placements and replies for as long; in a thread it costs a
 * core, and the loop goes on.
 */
export class AnswerChecker {
  /** `script`: the built worker; jest runs this module from its .ts source, which a worker cannot load, so a test names the built one. */
  constructor(private readonly script: URL = ANSWER_CHECK_WORKER) {}

  async check(toCheck: AnswerToCheck): Promise<ProofVerdict> {
    const worker = new Worker(this.script, { workerData: toCheck });
    try {
      // once() rejects on the thread's 'error'; an exit before any verdict rejects too.
      const verdict = once(worker, 'message') as Promise<[ProofVerdict]>;
      const ended = once(worker, 'exit').then(([code]) =>
        Promise.reject(new Error(`the check's thread ended (${String(code)}) without a verdict`)),
      );
      ended.catch(() => undefined);
      const [answer] = await Promise.race([verdict, ended]);
      return answer;
    } finally {
      await worker.terminate();
    }
  }
}
