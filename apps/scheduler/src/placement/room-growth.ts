import { Injectable } from '@nestjs/common';
import { ContainersRepository } from '#tern/persistence';
import { type MachineView, roomGrew } from '#tern/placement';
import { PoolIndex } from './pool-index.js';

interface KnownPool {
  readonly index: PoolIndex;
  views: Map<string, MachineView>;
}

/**
 * Tells the reconciler in which pools room grew since it last looked (roomGrew over each machine),
 * from Postgres, not from events: whatever freed it (a container that stopped or failed, a start
 * past its limit, a sandbox that ended, a machine that joined, grew or was verified) and whichever
 * scheduler replica saw that happen. A PoolIndex of its own per pool, so each look reads only the
 * machines whose generation moved. A pool looked at for the first time counts as grown: nothing
 * is known of what it was. Pools nobody waits on are dropped.
 */
@Injectable()
export class RoomGrowth {
  private pools = new Map<string, KnownPool>();

  constructor(private readonly containers: ContainersRepository) {}

  /** Of these pools, the ones where some machine has room it did not have at the last call. */
  async poolsGrown(pools: ReadonlySet<string>): Promise<Set<string>> {
    const next = new Map<string, KnownPool>();
    const grown = new Set<string>();
    for (const pool of pools) {
      const watched = this.pools.get(pool);
      const index = watched?.index ?? new PoolIndex();
      const machines = await index.refresh(this.containers, pool);
      const views = new Map(machines.map((m) => [m.view.id, m.view]));
      if (!watched || machines.some((m) => roomGrew(watched.views.get(m.view.id), m.view))) grown.add(pool);
      next.set(pool, { index, views });
    }
    this.pools = next;
    return grown;
  }
}
