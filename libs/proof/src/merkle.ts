import { createHash } from 'node:crypto';

/** Domain tags: a leaf can never pass for an inner node, nor padding for either. */
const LEAF = Buffer.from([0]);
const NODE = Buffer.from([1]);
const EMPTY = createHash('sha256')
  .update(Buffer.from([2]))
  .digest();

/** The leaf of row `index`: its index and its int32 values, little-endian. */
export function rowLeaf(index: number, row: Int32Array): Buffer {
  const i = Buffer.alloc(4);
  i.writeUInt32LE(index);
  const values = Buffer.alloc(row.length * 4);
  for (let j = 0; j < row.length; j++) values.writeInt32LE(row[j]!, j * 4);
  return createHash('sha256').update(LEAF).update(i).update(values).digest();
}

function node(left: Buffer, right: Buffer): Buffer {
  return createHash('sha256').update(NODE).update(left).update(right).digest();
}

/** Every level of the tree over `leaves`, padded to a power of two; the last level is the root alone. */
export function merkleLevels(leaves: Buffer[]): Buffer[][] {
  let width = 1;
  while (width < leaves.length) width *= 2;
  const levels: Buffer[][] = [[...leaves, ...Array<Buffer>(width - leaves.length).fill(EMPTY)]];
  while (levels.at(-1)!.length > 1) {
    const below = levels.at(-1)!;
    const level: Buffer[] = [];
    for (let i = 0; i < below.length; i += 2) level.push(node(below[i]!, below[i + 1]!));
    levels.push(level);
  }
  return levels;
}

export function merkleRoot(levels: Buffer[][]): Buffer {
  return levels.at(-1)![0]!;
}

/** The siblings from leaf `index` up to the root. */
export function merkleProof(levels: Buffer[][], index: number): Buffer[] {
  const proof: Buffer[] = [];
  for (let level = 0, i = index; level < levels.length - 1; level++, i >>= 1) proof.push(levels[level]![i ^ 1]!);
  return proof;
}

/** Whether `leaf` sits at `index` of the tree of `count` leaves whose root is `root`. */
export function verifyMerkleProof(root: Buffer, leaf: Buffer, index: number, count: number, proof: Buffer[]): boolean {
  let depth = 0;
  while (1 << depth < count) depth++;
  if (index < 0 || index >= count || proof.length !== depth) return false;
  let hash = leaf;
  for (let level = 0, i = index; level < depth; level++, i >>= 1) hash = i & 1 ? node(proof[level]!, hash) : node(hash, proof[level]!);
  return hash.equals(root);
}
