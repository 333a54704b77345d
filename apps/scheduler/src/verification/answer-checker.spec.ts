import { performance } from 'node:perf_hooks';
import { merkleLevels, merkleProof, merkleRoot, newChallenge, newProbe, PROBE_VECTORS, ReferenceProver, rowLeaf } from '#tern/proof';
import { AnswerChecker } from './answer-checker.js';

/** The built worker (npm test builds first): jest runs the checker from its .ts source. */
const BUILT_WORKER = new URL('../../../../dist/apps/scheduler/src/verification/answer-check.worker.js', import.meta.url);

/**
 * An answer built from a product of zeros, committed to honestly: its rows check against the root
 * and against the products (all zero), so the check goes on to draw A and B and runs Freivalds,
 * the full cost of an n×n check, before it finds the product is not A·B.
 */
function zeroProductAnswer(n: number) {
  const challenge = newChallenge(n);
  const zeros = new Int32Array(n);
  const levels = merkleLevels(Array.from({ length: n }, (_, i) => rowLeaf(i, zeros)));
  const probe = newProbe(challenge);
  const answer = {
    products: Array.from({ length: PROBE_VECTORS }, () => Array<number>(n).fill(0)),
    rows: probe.rows.map((index) => ({
      index,
      values: Array<number>(n).fill(0),
      proof: merkleProof(levels, index).map((h) => h.toString('hex')),
    })),
  };
  return { challenge, commitment: { root: merkleRoot(levels).toString('hex') }, probe, answer };
}

describe('AnswerChecker', () => {
  const checker = new AnswerChecker(BUILT_WORKER);

  it("gives libs/proof's verdict from its thread: an honest answer passes, a corrupted one fails with the reason", async () => {
    const challenge = newChallenge(64);
    const prover = new ReferenceProver(challenge);
    const probe = newProbe(challenge);
    const answer = prover.answer(probe);
    expect(await checker.check({ challenge, commitment: prover.commitment(), probe, answer })).toEqual({ ok: true });
    answer.products[1]![7] = (answer.products[1]![7]! + 1) % 67_108_859;
    expect(await checker.check({ challenge, commitment: prover.commitment(), probe, answer })).toMatchObject({ ok: false });
  });

  it("leaves the event loop free while it checks an H100's product", async () => {
    // n = 8192: drawing A and B and a Freivalds pass take most of a second of CPU or more; on the
    // event loop, that would be one gap as long as the check.
    const toCheck = zeroProductAnswer(8192);
    let last = performance.now();
    let longestGapMs = 0;
    const ticker = setInterval(() => {
      const now = performance.now();
      longestGapMs = Math.max(longestGapMs, now - last);
      last = now;
    }, 10);
    const started = performance.now();
    let verdict;
    try {
      verdict = await checker.check(toCheck);
    } finally {
      clearInterval(ticker);
    }
    // The gap up to now counts too: a check on the loop ends before the ticker can fire again.
    longestGapMs = Math.max(longestGapMs, performance.now() - last);
    const checkMs = performance.now() - started;
    expect(verdict).toEqual({ ok: false, reason: 'the product is not A·B' });
    expect(longestGapMs).toBeLessThan(checkMs / 4);
  }, 60_000);
});
