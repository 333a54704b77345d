import { capacityOf, type HeldResources, usageOf } from './usage.js';
import type { MachineView } from './types.js';

/** States in which a container holds its machine's resources. */
export const HOLDING_STATES = ['pending', 'scheduled', 'starting', 'running', 'stopping'] as const;

/** A machine of the pool as its row says (the registration's inventory). */
export interface PoolMachineRow {
  readonly id: string;
  readonly pool: string;
  readonly state: string;
  readonly cpuThreads: number | null;
  readonly memoryBytes: number | null;
  readonly gpus: readonly { index: number; model: string }[] | null;
  readonly verification?: MachineView['verification'];
}

/** What one container or sandbox holds on its machine. */
export interface HeldOnMachine {
  readonly machineId: string;
  readonly requested: (HeldResources & { readonly gpuCount?: number }) | null;
}

/** The pool's machines as place() reads them: capacity, what is held on each, and their scores. */
export function machineViews(
  rows: readonly PoolMachineRow[],
  held: readonly HeldOnMachine[],
  scores: ReadonlyMap<string, number>,
  /** Machines where a container of the image being placed has started already (the control plane's record). */
  holdingImage: ReadonlySet<string> = new Set(),
): MachineView[] {
  // Grouped once: a pool of 10,000 machines holding 50,000 containers is read per placement.
  const heldBy = new Map<string, NonNullable<HeldOnMachine['requested']>[]>();
  for (const h of held) {
    const list = heldBy.get(h.machineId);
    if (list) list.push(h.requested ?? {});
    else heldBy.set(h.machineId, [h.requested ?? {}]);
  }
  return rows.map((r) => {
    const capacity = capacityOf({ cpuThreads: r.cpuThreads, memoryBytes: r.memoryBytes, gpus: r.gpus });
    const mine = heldBy.get(r.id) ?? [];
    const used = usageOf(mine);
    // A container recorded from events alone has a GPU count but no indexes: count it against the lowest free ones.
    const unindexed = mine.reduce((n, h) => n + (h.gpuIndexes ? 0 : (h.gpuCount ?? 0)), 0);
    const taken = new Set(used.gpuIndexes);
    const extra = capacity.gpus
      .map((g) => g.index)
      .filter((i) => !taken.has(i))
      .slice(0, unindexed);
    return {
      id: r.id,
      pool: r.pool,
      state: r.state,
      capacity,
      used: { ...used, gpuIndexes: [...used.gpuIndexes, ...extra] },
      ...(r.verification ? { verification: r.verification } : {}),
      ...(scores.has(r.id) ? { reputation: scores.get(r.id) } : {}),
      ...(holdingImage.has(r.id) ? { holdsImage: true } : {}),
    };
  });
}
