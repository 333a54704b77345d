import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { ContainersRepository, ReputationRepository } from '#tern/persistence';
import { HOLDING_STATES, isPlaced, machineViews, type MachineView, placeMany, type PlacementRequest } from '#tern/placement';
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

/**
 * Reserves room for containers: in one transaction, locks the pool's machine rows, sums what
 * their containers hold, places and inserts the container rows on the chosen machines. Another
 * placement into the pool (this replica's or another's) waits on the locks and then sees the new
 * rows, so a machine is never booked twice over.
 */
@Injectable()
export class Placer {
  constructor(
    private readonly containers: ContainersRepository,
    private readonly storedReputation: ReputationRepository,
    private readonly reputation: ReputationScores,
  ) {}

  /**
   * Reserves room for `count` containers of one version at once: one transaction, one read of
   * the pool, placeMany() for the lot (the answers place() would give one at a time) and one
   * insert. What fits is reserved even when the rest does not; `reason` then says why the first
   * container that found no machine found none.
   */
  async reserveMany(versionId: string, request: PlacementRequest, count: number, reason: string): Promise<Reservation> {
    return this.containers.transaction(async (tx) => {
      const machines = await this.machines(tx, request);
      const asked = await this.withPoolMinimum(tx, request);
      const { results } = placeMany(Array<PlacementRequest>(count).fill(asked), machines);
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

  /** The pool's machines, row-locked until the transaction ends, with what they hold and their scores. */
  private async machines(tx: ContainersRepository, request: PlacementRequest): Promise<MachineView[]> {
    const rows = await tx.lockMachinesOfPool(request.pool);
    if (!rows.length) return [];
    const ids = rows.map((r) => r.id);
    const held = await tx.resourcesHeldOn(ids, HOLDING_STATES);
    const holding = new Set(request.image ? await tx.machinesThatRanImage(ids, request.image) : []);
    const score = this.reputation.scores() ?? (await this.storedScores(ids));
    return machineViews(rows, held, score, holding);
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
