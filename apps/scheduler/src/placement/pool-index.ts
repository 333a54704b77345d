import type { ContainersRepository } from '#tern/persistence';
import { HOLDING_STATES, machineViews, type MachineView } from '#tern/placement';

/** A machine as the index last read it: its view without scores, and the generation it was read at. */
export interface IndexedMachine {
  readonly view: MachineView;
  readonly generation: number;
}

/**
 * One pool's machines as placement reads them (size, state, what is held on each), kept in memory
 * between placements. Each refresh reads every machine's generation (one index-only scan of
 * small rows) and re-reads, with what they hold, only the machines whose generation moved: a
 * batch into a pool of 10,000 machines holding 50,000 containers reads the machines the last
 * batches touched instead of all 50,000 containers. The database bumps a generation on every
 * change that placement reads (the 1765420000000 migration's triggers), so what refresh() returns
 * is what a full read would have returned; the reservation checks it again under lock (Placer).
 */
export class PoolIndex {
  private machines = new Map<string, IndexedMachine>();

  /** The pool's machines as they stand now, read through `tx`. */
  async refresh(tx: ContainersRepository, pool: string): Promise<IndexedMachine[]> {
    const generations = await tx.machineGenerations(pool);
    const stale = generations.filter((g) => this.machines.get(g.id)?.generation !== g.generation).map((g) => g.id);
    if (stale.length) {
      // The rows (and their generations) before what they hold: data read later is as new or newer, never older.
      const rows = await tx.placementMachines(stale);
      const held = await tx.resourcesHeldOn(stale, HOLDING_STATES);
      const views = machineViews(rows, held, new Map());
      rows.forEach((r, i) => this.machines.set(r.id, { view: views[i], generation: r.generation }));
    }
    const next = new Map<string, IndexedMachine>();
    for (const g of generations) {
      const m = this.machines.get(g.id);
      // A machine that changed again between the two reads: kept at the newer read's generation, checked under lock.
      if (m) next.set(g.id, m);
    }
    this.machines = next;
    return [...next.values()];
  }

  /** Forgets these machines: the next refresh re-reads them. */
  forget(ids: Iterable<string>): void {
    for (const id of ids) this.machines.delete(id);
  }
}
