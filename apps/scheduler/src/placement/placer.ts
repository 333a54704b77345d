import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { ContainersRepository, ReputationRepository } from '#tern/persistence';
import { isPlaced, type MachineView, placeMany, type PlacementRequest, type PlacementResult } from '#tern/placement';
import { type IndexedMachine, PoolIndex } from './pool-index.js';
import { ReputationScores } from './reputation-scores.js';

/** A container reserved on a machine, its row inserted as scheduled. */
export interface Placed {
  readonly containerId: string;
  readonly machineId: string;
  readonly gpuIndexes: number[];
  readonly gpuType?: string;
}

/** The containers reserved, and why the rest found no machine. */
export interface Reservation {
  readonly placed: Placed[];
  readonly unplaced?: string;
}

/** Optimistic tries before a batch locks the whole pool (which cannot conflict). */
const OPTIMISTIC_TRIES = 3;

/** Some chosen machines changed between the read and the lock: the batch rolls back and tries again. */
class Conflict extends Error {
  constructor(readonly machineIds: string[]) {
    super(`machines changed while placing: ${machineIds.join(', ')}`);
  }
}

/**
 * Reserves room for containers, optimistically: the pool is read from an in-memory index (only
 * the machines whose generation moved are re-read, see PoolIndex), the batch is placed, and then,
 * in the same transaction, only the chosen machines are locked (in id order) and their
 * generations compared with the ones placed against. Equal: nothing that placement reads changed
 * on them, so the container rows are inserted (which bumps the generations, for every other
 * placer). Different: the transaction rolls back and the batch is placed again from a fresh read.
 * Another placement onto the same machine (this replica's or another's, or a sandbox) waits on
 * the lock and then sees the new generation, so a machine is never booked twice over; placements
 * onto different machines no longer wait for each other. After OPTIMISTIC_TRIES conflicts a batch
 * locks the pool's machine rows first, as every placement used to, so it always gets through.
 */
@Injectable()
export class Placer {
  private readonly pools = new Map<string, PoolIndex>();

  constructor(
    private readonly containers: ContainersRepository,
    private readonly storedReputation: ReputationRepository,
    private readonly reputation: ReputationScores,
  ) {}

  /**
   * Reserves room for `count` containers of one version at once: one transaction, placeMany()
   * for the lot (the answers place() would give one at a time) and one insert. What fits is
   * reserved even when the rest does not; `reason` then says why the first container that found
   * no machine found none.
   */
  async reserveMany(versionId: string, request: PlacementRequest, count: number, reason: string): Promise<Reservation> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.tryReserve(versionId, request, count, reason, attempt > OPTIMISTIC_TRIES);
      } catch (e) {
        // Locking the whole pool leaves nothing to conflict with: a conflict then is a bug, not contention.
        if (!(e instanceof Conflict) || attempt > OPTIMISTIC_TRIES) throw e;
        this.indexOf(request.pool).forget(e.machineIds);
      }
    }
  }

  private async tryReserve(
    versionId: string,
    request: PlacementRequest,
    count: number,
    reason: string,
    lockPool: boolean,
  ): Promise<Reservation> {
    return this.containers.transaction(async (tx) => {
      if (lockPool) await tx.lockMachinesOfPool(request.pool);
      const indexed = await this.indexOf(request.pool).refresh(tx, request.pool);
      const machines = await this.views(tx, request, indexed);
      const asked = await this.withPoolMinimum(tx, request);
      const { results } = placeMany(Array<PlacementRequest>(count).fill(asked), machines);
      await this.lockChosen(tx, results, indexed);
      const placed = results.filter(isPlaced).map((p): Placed => ({
        containerId: `c-${randomUUID()}`,
        machineId: p.machineId,
        gpuIndexes: p.gpuIndexes,
        ...(p.gpuType ? { gpuType: p.gpuType } : {}),
      }));
      await tx.insertScheduledMany(
        placed.map((p) => ({
          id: p.containerId,
          deploymentVersionId: versionId,
          machineId: p.machineId,
          reason,
          requested: {
            cpuMillicores: request.cpuMillicores,
            memoryBytes: request.memoryBytes,
            gpuCount: request.gpuCount,
            ...(p.gpuType ? { gpu: p.gpuType } : {}),
            gpuIndexes: p.gpuIndexes,
          },
        })),
      );
      const unplaced = results.find((r) => !isPlaced(r));
      return { placed, ...(unplaced && !isPlaced(unplaced) ? { unplaced: unplaced.reason } : {}) };
    });
  }

  /** Locks the machines the batch chose; throws Conflict when any changed since the index read it. */
  private async lockChosen(
    tx: ContainersRepository,
    results: readonly PlacementResult[],
    indexed: readonly IndexedMachine[],
  ): Promise<void> {
    const chosen = [...new Set(results.filter(isPlaced).map((p) => p.machineId))];
    if (!chosen.length) return;
    const readAt = new Map(indexed.map((m) => [m.view.id, m.generation]));
    const now = new Map((await tx.lockMachines(chosen)).map((m) => [m.id, m.generation]));
    const changed = chosen.filter((id) => now.get(id) !== readAt.get(id));
    if (changed.length) throw new Conflict(changed);
  }

  private indexOf(pool: string): PoolIndex {
    let index = this.pools.get(pool);
    if (!index) this.pools.set(pool, (index = new PoolIndex()));
    return index;
  }

  /** The pool's machines as place() reads them: the index's views with scores and the image's holders. */
  private async views(tx: ContainersRepository, request: PlacementRequest, indexed: readonly IndexedMachine[]): Promise<MachineView[]> {
    if (!indexed.length) return [];
    const ids = indexed.map((m) => m.view.id);
    const holding = new Set(request.image ? await tx.machinesThatRanImage(ids, request.image) : []);
    const score = this.reputation.scores() ?? (await this.storedScores(ids));
    return indexed.map(({ view }) =>
      score.has(view.id) || holding.has(view.id)
        ? {
            ...view,
            ...(score.has(view.id) ? { reputation: score.get(view.id) } : {}),
            ...(holding.has(view.id) ? { holdsImage: true } : {}),
          }
        : view,
    );
  }

  /**
   * The request with the pool's minimum reputation applied too: the stricter of the pool's and
   * the deployment's wins. Only new containers are placed here, so work already running on a
   * machine that falls below either minimum finishes where it is.
   */
  private async withPoolMinimum(tx: ContainersRepository, request: PlacementRequest): Promise<PlacementRequest> {
    const poolMin = await tx.poolMinReputation(request.pool);
    if (poolMin === undefined) return request;
    return { ...request, minReputation: Math.max(poolMin, request.minReputation ?? 0) };
  }

  /** The newest stored score per machine: the fallback while the reputation bucket is empty. */
  private async storedScores(ids: string[]): Promise<Map<string, number>> {
    const scores = await this.storedReputation.latestScores(ids);
    return new Map(scores.map((s) => [s.machineId, s.score]));
  }
}
