import { PROBE_VECTORS, type ProofAnswer, type ProofProbe } from './protocol.js';

/**
 * int32 vectors on the wire: little-endian bytes in base64, a third of JSON's decimal size, so
 * 31 revealed rows of n = 4096 fit one NATS message (larger n: probeParts).
 */
export function encodeInt32(values: ArrayLike<number>): string {
  const bytes = Buffer.alloc(values.length * 4);
  for (let i = 0; i < values.length; i++) bytes.writeInt32LE(values[i]!, i * 4);
  return bytes.toString('base64');
}

/** undefined when the text is not base64 of whole int32s. */
export function decodeInt32(text: string): Int32Array | undefined {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text)) return undefined;
  const bytes = Buffer.from(text, 'base64');
  if (bytes.length % 4) return undefined;
  const out = new Int32Array(bytes.length / 4);
  for (let i = 0; i < out.length; i++) out[i] = bytes.readInt32LE(i * 4);
  return out;
}

/** What one part of a probe's answer may take of a NATS message (1 MiB max_payload), the rest left to JSON's envelope. */
export const ANSWER_PART_BYTES = 900_000;

/** Characters of n int32s in base64. */
function base64Length(n: number): number {
  return 4 * Math.ceil((4 * n) / 3);
}

/**
 * The probe's rows in parts whose answers each fit one NATS message: every part's answer carries
 * the products (PROBE_VECTORS vectors of n) and its share of the rows, each n int32 with its
 * Merkle proof (a 64-hex-digit hash per level). At n = 4096 the 31 rows fit one part; at 8192, two.
 */
export function probeParts(n: number, rows: readonly number[]): number[][] {
  const products = PROBE_VECTORS * (base64Length(n) + 3);
  const row = base64Length(n) + Math.ceil(Math.log2(n)) * 67 + 40;
  const perPart = Math.max(1, Math.floor((ANSWER_PART_BYTES - products) / row));
  const parts: number[][] = [];
  for (let i = 0; i < rows.length; i += perPart) parts.push(rows.slice(i, i + perPart));
  return parts;
}

/** One part of a probe as a prover is asked it: the vectors (base64 int32s), its rows, and `more` on all but the last. */
export interface ProbePart {
  vectors: string[];
  rows: number[];
  more?: true;
}

/** A prover's answer to one part, int32 vectors in base64 (the agent's `HardwareAnswer`). */
export interface EncodedAnswer {
  products: readonly string[];
  rows: readonly { index: number; values: string; proof: string[] }[];
}

/**
 * The probe asked in parts (probeParts), each through `ask`, and the parts' answers made one:
 * every part's products must be the first's, and the rows of all parts make the answer. A `wrong`
 * answer says what was wrong with it; what `ask` throws is the caller's to judge.
 */
export async function askInParts(
  n: number,
  probe: ProofProbe,
  ask: (part: ProbePart) => Promise<EncodedAnswer>,
): Promise<ProofAnswer | { wrong: string }> {
  const vectors = probe.vectors.map((v) => encodeInt32(v));
  const parts = probeParts(n, probe.rows);
  const answer: ProofAnswer = { products: [], rows: [] };
  for (const [i, rows] of parts.entries()) {
    const part = decodeAnswer(await ask({ vectors, rows, ...(i < parts.length - 1 ? { more: true as const } : {}) }));
    if (!part) return { wrong: 'answered its probe with values that are not int32 vectors' };
    if (i > 0 && JSON.stringify(part.products) !== JSON.stringify(answer.products))
      return { wrong: 'answered the parts of one probe with different products' };
    answer.products = part.products;
    answer.rows.push(...part.rows);
  }
  return answer;
}

function decodeAnswer(reply: EncodedAnswer): ProofAnswer | undefined {
  const products = reply.products.map((p) => decodeInt32(p));
  const rows = reply.rows.map((r) => ({ index: r.index, values: decodeInt32(r.values), proof: r.proof }));
  if (products.some((p) => !p) || rows.some((r) => !r.values)) return undefined;
  return {
    products: products.map((p) => Array.from(p!)),
    rows: rows.map((r) => ({ index: r.index, values: Array.from(r.values!), proof: r.proof })),
  };
}
