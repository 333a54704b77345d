import { P } from './field.js';
import { challengeMatrices, multiply } from './matrices.js';
import { merkleLevels, merkleProof, merkleRoot, rowLeaf, verifyMerkleProof } from './merkle.js';
import {
  escapeBound,
  newChallenge,
  newProbe,
  PROBE_VECTORS,
  type ProofChallenge,
  ReferenceProver,
  REVEALED_ROWS,
  verifyAnswer,
} from './protocol.js';

/** One whole round: commitment first, then the probe, then the answer. */
function round(challenge: ProofChallenge, prover: ReferenceProver) {
  const commitment = prover.commitment();
  const probe = newProbe(challenge);
  return verifyAnswer(challenge, commitment, probe, prover.answer(probe));
}

describe('proof of compute', () => {
  it('works in a prime field whose products are exact in a double', () => {
    for (let d = 2; d * d <= P; d++) expect(P % d).not.toBe(0);
    expect((P - 1) * (P - 1)).toBeLessThan(2 ** 53);
    // An int8 times a residue, summed over 2^17 terms, stays exact.
    expect(128 * (P - 1) * 2 ** 17).toBeLessThan(2 ** 53);
  });

  it('draws the same matrices from the same seed, and others from another', () => {
    const seed = Buffer.alloc(32, 7);
    expect(challengeMatrices(seed, 64)).toEqual(challengeMatrices(seed, 64));
    expect(challengeMatrices(Buffer.alloc(32, 8), 64).a).not.toEqual(challengeMatrices(seed, 64).a);
  });

  it('multiplies exactly, in int32', () => {
    const n = 3;
    const a = Int8Array.from([1, 2, 3, 4, 5, 6, 7, 8, -128]);
    const b = Int8Array.from([127, 0, 0, 0, 127, 0, 0, 0, -128]);
    expect(Array.from(multiply(a, b, n))).toEqual([127, 254, -384, 508, 635, -768, 889, 1016, 16384]);
  });

  it('proves a row of the committed tree, and nothing else', () => {
    const rows = Array.from({ length: 5 }, (_, i) => Int32Array.from([i, -i, 2 ** 31 - 1]));
    const levels = merkleLevels(rows.map((r, i) => rowLeaf(i, r)));
    const root = merkleRoot(levels);
    for (let i = 0; i < 5; i++) expect(verifyMerkleProof(root, rowLeaf(i, rows[i]!), i, 5, merkleProof(levels, i))).toBe(true);
    // Another row's values, another index, or a padding position do not pass.
    expect(verifyMerkleProof(root, rowLeaf(1, rows[2]!), 1, 5, merkleProof(levels, 1))).toBe(false);
    expect(verifyMerkleProof(root, rowLeaf(1, rows[1]!), 2, 5, merkleProof(levels, 1))).toBe(false);
    expect(verifyMerkleProof(root, rowLeaf(5, rows[1]!), 5, 5, merkleProof(levels, 5))).toBe(false);
  });

  it('passes an honest prover', () => {
    for (const n of [REVEALED_ROWS, 64, 200]) {
      const challenge = newChallenge(n);
      expect(round(challenge, new ReferenceProver(challenge))).toEqual({ ok: true });
    }
  });

  it('bounds the escape of a prover that skipped half the product below 2^-30', () => {
    expect(REVEALED_ROWS).toBe(31);
    expect(PROBE_VECTORS).toBe(2);
    expect(escapeBound(0.5)).toBeLessThan(2 ** -30);
    // A prover that computed all but one row of n = 4096 mostly escapes: the timing catches that
    // one (its work is the whole product), the rows catch whoever skips a real share of it.
    expect(escapeBound(1 / 4096)).toBeGreaterThan(0.99);
  });

  it('catches 1,000 of 1,000 forged answers: half the rows skipped, made up, or a product off by one', () => {
    const n = 32;
    const forgers: Record<string, (a: Int8Array, b: Int8Array, n: number) => Int32Array> = {
      // Computes only the first half of C's rows; the rest stay zero.
      'skipped half': (a, b, m) => {
        const c = multiply(a, b, m);
        c.fill(0, (m / 2) * m);
        return c;
      },
      // Commits to numbers it never computed.
      'made up': (_a, _b, m) => Int32Array.from({ length: m * m }, (_, i) => (i * 2654435761) | 0),
      // One value of every other row off by one.
      'off by one': (a, b, m) => {
        const c = multiply(a, b, m);
        for (let i = 0; i < m; i += 2) c[i * m + (i % m)]! += 1;
        return c;
      },
    };
    const escaped: Record<string, number> = {};
    const reasons = new Set<string>();
    for (let t = 0; t < 1000; t++) {
      const [name, forge] = Object.entries(forgers)[t % 3]!;
      const challenge = newChallenge(n);
      const verdict = round(challenge, new ReferenceProver(challenge, forge));
      if (verdict.ok) escaped[name] = (escaped[name] ?? 0) + 1;
      else reasons.add(verdict.reason);
    }
    expect(escaped).toEqual({});
    expect([...reasons].every((r) => /disagrees with the product|is not A·B/.test(r))).toBe(true);
  });

  it('refuses an answer that is honest about the product but not about its commitment', () => {
    const challenge = newChallenge(64);
    const honest = new ReferenceProver(challenge);
    const other = new ReferenceProver(newChallenge(64));
    const probe = newProbe(challenge);
    // y computed honestly after the probe (O(n²)), rows from a commitment to something else.
    const answer = { ...honest.answer(probe), rows: other.answer(probe).rows };
    expect(verifyAnswer(challenge, honest.commitment(), probe, answer)).toMatchObject({ ok: false });
    expect(verifyAnswer(challenge, other.commitment(), probe, answer)).toEqual({
      ok: false,
      reason: expect.stringMatching(/disagrees with the product/),
    });
  });

  it('refuses malformed answers, naming what is wrong', () => {
    const challenge = newChallenge(32);
    const prover = new ReferenceProver(challenge);
    const commitment = prover.commitment();
    const probe = newProbe(challenge);
    const answer = prover.answer(probe);
    expect(verifyAnswer(challenge, { root: 'x' }, probe, answer)).toMatchObject({ ok: false, reason: /sha256 root/ });
    expect(verifyAnswer(challenge, commitment, probe, { ...answer, products: [[1]] })).toMatchObject({ ok: false, reason: /products/ });
    expect(verifyAnswer(challenge, commitment, probe, { ...answer, rows: answer.rows.slice(1) })).toMatchObject({
      ok: false,
      reason: /missing or malformed/,
    });
    const outOfField = answer.products.map((y) => y.map(() => P));
    expect(verifyAnswer(challenge, commitment, probe, { ...answer, products: outOfField })).toMatchObject({
      ok: false,
      reason: /not a residue/,
    });
    expect(() => newChallenge(8)).toThrow(RangeError);
  });
});
