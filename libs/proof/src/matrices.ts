import { createCipheriv, createHash } from 'node:crypto';

/**
 * The two n×n int8 matrices of a challenge, row-major, drawn from its seed: AES-256-CTR's
 * keystream under a key hashed from the seed. Anyone holding the seed (the control plane, the
 * prover's agent) draws the same bytes, at the speed of AES.
 */
export function challengeMatrices(seed: Buffer, n: number): { a: Int8Array; b: Int8Array } {
  const key = createHash('sha256').update('tern-proof/matrices/v1').update(seed).digest();
  const cipher = createCipheriv('aes-256-ctr', key, Buffer.alloc(16));
  const bytes = cipher.update(Buffer.alloc(2 * n * n));
  return {
    a: new Int8Array(bytes.buffer, bytes.byteOffset, n * n),
    b: new Int8Array(bytes.buffer, bytes.byteOffset + n * n, n * n),
  };
}

/**
 * C = A·B with exact int32 sums (|c| ≤ n·128·128 < 2³¹ for n ≤ 2¹⁷): the product a device
 * proves it computed. This CPU version is the reference prover; a GPU prover computes the same
 * numbers (int8 inputs, int32 accumulation), so answers compare exactly.
 */
export function multiply(a: Int8Array, b: Int8Array, n: number): Int32Array {
  const c = new Int32Array(n * n);
  for (let i = 0; i < n; i++) {
    const row = i * n;
    for (let k = 0; k < n; k++) {
      const aik = a[row + k]!;
      if (aik === 0) continue;
      const bk = k * n;
      for (let j = 0; j < n; j++) c[row + j]! += aik * b[bk + j]!;
    }
  }
  return c;
}
