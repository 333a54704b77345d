import { createHash } from 'node:crypto';

/**
 * The builder a spec's build goes to: the highest hash of (spec hash, machine id) among the ready
 * builders (rendezvous hashing). Every gateway replica picks the same machine for the same spec
 * while the set of builders holds, so concurrent builds of one spec meet on one builder, whose
 * layer cache and layout lock make the second build run nothing.
 */
export function chooseBuilder(specHash: string, builders: readonly string[]): string | undefined {
  let best: { id: string; score: string } | undefined;
  for (const id of builders) {
    const score = createHash('sha256').update(`${specHash}\n${id}`).digest('hex');
    if (!best || score > best.score) best = { id, score };
  }
  return best?.id;
}
