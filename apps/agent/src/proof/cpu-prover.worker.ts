import { parentPort, workerData } from 'node:worker_threads';
import { decodeInt32, encodeInt32, ReferenceProver } from '#tern/proof';
import type { CpuProverAsk, CpuProverCommitted } from './cpu-prover.js';

/**
 * The CPU prover's thread: computes the product off the agent's event loop, posts the
 * commitment, then answers each probe it gets from the product it kept.
 */
const { seed, n } = workerData as { seed: string; n: number };
const prover = new ReferenceProver({ seed, n });
parentPort!.postMessage({ root: prover.commitment().root } satisfies CpuProverCommitted);
// Each probe, or each part of one (libs/proof probeParts), from the same product.
parentPort!.on('message', (ask: CpuProverAsk) => {
  const vectors = ask.vectors.map((v) => Array.from(decodeInt32(v) ?? []));
  const answer = prover.answer({ vectors, rows: ask.rows });
  parentPort!.postMessage({
    products: answer.products.map((y) => encodeInt32(y)),
    rows: answer.rows.map((r) => ({ index: r.index, values: encodeInt32(r.values), proof: r.proof })),
  });
});
