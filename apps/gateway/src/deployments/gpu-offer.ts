import { gpuTypeMatches, type ResolvedSpec } from '#tern/contracts';

/** What the check needs of a pool and of a machine: plain data, so it is tested without a database. */
export interface PoolOffer {
  readonly name: string;
  readonly allowedGpuTypes: string[];
}

export interface MachineOffer {
  readonly pool: string;
  readonly gpuModels: string[];
}

/** The field and rule a deploy breaks, in the form of SpecError. */
export interface OfferProblem {
  readonly field: 'pool' | 'gpu' | 'gpu_count';
  readonly message: string;
}

function sameType(a: string, b: string): boolean {
  return gpuTypeMatches(a, b) || gpuTypeMatches(b, a);
}

/** A pool with no GPU list admits any machine, so only its machines say what it offers. */
function poolAdmits(pool: PoolOffer, model: string): boolean {
  return pool.allowedGpuTypes.length === 0 || pool.allowedGpuTypes.some((t) => gpuTypeMatches(model, t));
}

/**
 * Whether the spec's GPU request could ever be met, so a deploy that can never run is refused
 * at once instead of waiting in the backlog forever. A type is offered when a pool lists it
 * or a machine (in any state: it may come back) in a pool that admits it has one; the count
 * is only checked against machines that exist, since a listed type may not have joined yet.
 * `explicitPool`: the spec named its pool; otherwise every pool is a candidate.
 */
export function gpuOfferProblem(
  spec: ResolvedSpec,
  explicitPool: boolean,
  pools: PoolOffer[],
  machines: MachineOffer[],
): OfferProblem | null {
  const candidates = explicitPool ? pools.filter((p) => p.name === spec.pool) : pools;
  if (explicitPool && !candidates.length) {
    return { field: 'pool', message: `pool "${spec.pool}" does not exist (pools: ${pools.map((p) => p.name).join(', ') || 'none'})` };
  }
  if (spec.gpuCount === 0) return null;
  const names = new Set(candidates.map((p) => p.name));
  const where = explicitPool ? ` in pool "${spec.pool}"` : '';
  const gpusOf = (m: MachineOffer, pool: PoolOffer, type?: string) =>
    m.gpuModels.filter((model) => poolAdmits(pool, model) && (type === undefined || gpuTypeMatches(model, type)));
  const matching = (type?: string) =>
    machines
      .filter((m) => names.has(m.pool))
      .map(
        (m) =>
          gpusOf(
            m,
            candidates.find((p) => p.name === m.pool)!,
            type,
          ).length,
      )
      .filter((n) => n > 0);

  const types = spec.gpuTypes.length ? spec.gpuTypes : [undefined];
  const offered = types.filter((type) => {
    const listed = candidates.some((p) =>
      type === undefined ? p.allowedGpuTypes.length > 0 : p.allowedGpuTypes.some((t) => sameType(t, type)),
    );
    return listed || matching(type).length > 0;
  });
  if (!offered.length) {
    const listed = [...new Set(candidates.flatMap((p) => p.allowedGpuTypes))];
    const models = [...new Set(machines.filter((m) => names.has(m.pool)).flatMap((m) => m.gpuModels))];
    const what = spec.gpuTypes.length ? `gpu ${spec.gpuTypes.join(' or ')}` : 'a GPU';
    return {
      field: 'gpu',
      message: `no pool offers ${what}${where}: pools list ${listed.join(', ') || 'no GPU types'}, machines have ${models.join(', ') || 'no GPUs'}`,
    };
  }
  const counts = offered.flatMap((type) => matching(type));
  if (counts.length && Math.max(...counts) < spec.gpuCount) {
    return {
      field: 'gpu_count',
      message: `gpu_count ${spec.gpuCount} is more than any machine has: the most on one machine${where} is ${Math.max(...counts)}`,
    };
  }
  return null;
}
