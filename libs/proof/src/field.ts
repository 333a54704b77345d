/**
 * The prime field the probes work in: P < 2²⁶, so the product of two residues (< 2⁵²) is exact
 * in a double, and an int8 times a residue summed over up to 2¹⁷ terms stays under 2⁵³.
 */
export const P = 67_108_859;

export function residue(x: number): number {
  const r = x % P;
  return r < 0 ? r + P : r;
}

/** M·v mod P for an n×n int8 matrix M (row-major): each sum is exact before its one reduction. */
export function int8TimesVector(m: Int8Array, v: number[], n: number): number[] {
  const out = new Array<number>(n);
  for (let i = 0; i < n; i++) {
    let sum = 0;
    const row = i * n;
    for (let j = 0; j < n; j++) sum += m[row + j]! * v[j]!;
    out[i] = residue(sum);
  }
  return out;
}

/** row·v mod P for int32 values: each value reduced first, the sum reduced as it goes. */
export function rowTimesVector(row: ArrayLike<number>, v: number[]): number {
  let sum = 0;
  for (let j = 0; j < row.length; j++) sum = (sum + residue(row[j]!) * v[j]!) % P;
  return sum;
}
