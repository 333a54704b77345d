import { randomBytes, randomInt } from 'node:crypto';
import { P, int8TimesVector, rowTimesVector } from './field.js';
import { challengeMatrices, multiply } from './matrices.js';
import { merkleLevels, merkleProof, merkleRoot, rowLeaf, verifyMerkleProof } from './merkle.js';

/**
 * Proof of compute: a machine shows it multiplied two n×n int8 matrices it could not know in
 * advance, and the control plane checks it in O(n²) on its CPU.
 *
 * 1. The control plane sends a challenge: a fresh seed and n. Both sides draw A and B from it.
 * 2. The machine computes C = A·B and commits to it: the Merkle root over C's rows. The time
 *    from challenge to commitment is the work timed against the claimed device.
 * 3. Only then the control plane picks PROBE_VECTORS random vectors r over F_P and
 *    REVEALED_ROWS random rows.
 * 4. The machine answers y = C·r for each r, and the chosen rows with their Merkle proofs.
 * 5. The control plane checks y = A·(B·r) (Freivalds: O(n²), with A and B drawn from the seed),
 *    each revealed row against the root, and each revealed row's C_i·r against y_i.
 *
 * y is pinned to the true product by step 5's first check; a committed row that differs from
 * the true one passes its C_i·r = y_i check with probability P^-PROBE_VECTORS, because r was
 * drawn after the commitment. A prover that got a share f of the rows wrong (skipped them, made
 * them up) escapes only when no revealed row is wrong or a wrong one collides:
 * escape ≤ (1 − f)^REVEALED_ROWS + P^-PROBE_VECTORS (escapeBound). For f = ½ that is below 2⁻³⁰.
 */
export const REVEALED_ROWS = 31;
export const PROBE_VECTORS = 2;

export interface ProofChallenge {
  /** 32 random bytes, hex. */
  seed: string;
  n: number;
}

export interface ProofCommitment {
  /** The Merkle root over C's rows, hex. */
  root: string;
}

export interface ProofProbe {
  /** PROBE_VECTORS vectors of n residues mod P. */
  vectors: number[][];
  /** REVEALED_ROWS distinct row indices. */
  rows: number[];
}

export interface RevealedRow {
  index: number;
  values: number[];
  /** Sibling hashes from the row's leaf to the root, hex. */
  proof: string[];
}

export interface ProofAnswer {
  /** C·r for each probe vector, mod P. */
  products: number[][];
  rows: RevealedRow[];
}

export type ProofVerdict = { ok: true } | { ok: false; reason: string };

export function newChallenge(n: number): ProofChallenge {
  if (!Number.isInteger(n) || n < REVEALED_ROWS || n > 1 << 17) throw new RangeError(`n must be an integer in [${REVEALED_ROWS}, 2^17]`);
  return { seed: randomBytes(32).toString('hex'), n };
}

/** Drawn after the commitment arrived, never before. */
export function newProbe(challenge: ProofChallenge): ProofProbe {
  const vectors = Array.from({ length: PROBE_VECTORS }, () => Array.from({ length: challenge.n }, () => randomInt(P)));
  const rows = new Set<number>();
  while (rows.size < REVEALED_ROWS) rows.add(randomInt(challenge.n));
  return { vectors, rows: [...rows] };
}

/** Upper bound on the chance that a prover with a share `wrongRows` of C's rows wrong passes. */
export function escapeBound(wrongRows: number, revealed = REVEALED_ROWS, vectors = PROBE_VECTORS): number {
  return (1 - wrongRows) ** revealed + P ** -vectors;
}

/** Checks an answer against the challenge, the commitment made before the probe, and the probe. */
export function verifyAnswer(challenge: ProofChallenge, commitment: ProofCommitment, probe: ProofProbe, answer: ProofAnswer): ProofVerdict {
  const { n } = challenge;
  if (!/^[0-9a-f]{64}$/.test(commitment.root)) return { ok: false, reason: 'the commitment is not a sha256 root' };
  if (answer.products?.length !== probe.vectors.length || answer.products.some((y) => y?.length !== n))
    return { ok: false, reason: `the answer needs ${probe.vectors.length} products of ${n} residues` };
  if (answer.products.some((y) => y.some((v) => !Number.isInteger(v) || v < 0 || v >= P)))
    return { ok: false, reason: 'a product holds a value that is not a residue mod P' };
  const byIndex = new Map((answer.rows ?? []).map((r) => [r.index, r]));
  const root = Buffer.from(commitment.root, 'hex');
  for (const index of probe.rows) {
    const row = byIndex.get(index);
    if (!row || row.values?.length !== n || row.values.some((v) => !Number.isInteger(v) || v < -(2 ** 31) || v >= 2 ** 31))
      return { ok: false, reason: `row ${index} is missing or malformed` };
    const leaf = rowLeaf(index, Int32Array.from(row.values));
    const proof = (row.proof ?? []).map((h) => Buffer.from(h, 'hex'));
    if (!verifyMerkleProof(root, leaf, index, n, proof)) return { ok: false, reason: `row ${index} is not the committed one` };
    for (let v = 0; v < probe.vectors.length; v++)
      if (rowTimesVector(row.values, probe.vectors[v]!) !== answer.products[v]![index])
        return { ok: false, reason: `row ${index} disagrees with the product it was committed to` };
  }
  const { a, b } = challengeMatrices(Buffer.from(challenge.seed, 'hex'), n);
  for (let v = 0; v < probe.vectors.length; v++) {
    const expected = int8TimesVector(a, int8TimesVector(b, probe.vectors[v]!, n), n);
    if (expected.some((e, i) => e !== answer.products[v]![i])) return { ok: false, reason: 'the product is not A·B' };
  }
  return { ok: true };
}

/**
 * The reference prover, on the CPU: what a machine's prover does, with C kept in memory between
 * the commitment and the answer. A GPU prover computes C on the device and answers the same way.
 */
export class ReferenceProver {
  private readonly c: Int32Array;
  private readonly levels: Buffer[][];

  /** `product` replaces the honest product (a forger's, in tests). */
  constructor(
    private readonly challenge: ProofChallenge,
    product?: (a: Int8Array, b: Int8Array, n: number) => Int32Array,
  ) {
    const { a, b } = challengeMatrices(Buffer.from(challenge.seed, 'hex'), challenge.n);
    this.c = (product ?? multiply)(a, b, challenge.n);
    this.levels = merkleLevels(Array.from({ length: challenge.n }, (_, i) => rowLeaf(i, this.row(i))));
  }

  commitment(): ProofCommitment {
    return { root: merkleRoot(this.levels).toString('hex') };
  }

  answer(probe: ProofProbe): ProofAnswer {
    const n = this.challenge.n;
    return {
      products: probe.vectors.map((r) => Array.from({ length: n }, (_, i) => rowTimesVector(this.row(i), r))),
      rows: probe.rows.map((index) => ({
        index,
        values: Array.from(this.row(index)),
        proof: merkleProof(this.levels, index).map((h) => h.toString('hex')),
      })),
    };
  }

  private row(i: number): Int32Array {
    const n = this.challenge.n;
    return this.c.subarray(i * n, (i + 1) * n);
  }
}
