import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { type ContainerResources, ContainersRepository, ReputationRepository } from '#tern/persistence';
import {
  HOLDING_STATES,
  isPlaced,
  machineViews,
  type MachineView,
  place,
  type PlacementRequest,
  type PlacementResult,
} from '#tern/placement';
import { ReputationScores } from './reputation-scores.js';

export type PlaceOutcome =
  { placed: true; containerId: string; machineId: string; gpuIndexes: number[]; gpuType?: string } | { placed: false; reason: string };

/**
 * Reserves room for one container: in one transaction, locks the pool's machine rows, sums
 * what their containers hold, runs place() and inserts the container row on the chosen
 * machine. Another placement into the pool (this replica's or another's) waits on the locks
 * and then sees the new row, so a machine is never booked twice over.
 */
@Injectable()
export class Placer {
  constructor(
    private readonly containers: ContainersRepository,
    private readonly storedReputation: ReputationRepository,
    private readonly reputation: ReputationScores,
  ) {}

  async reserve(versionId: string, request: PlacementRequest, reason: string): Promise<PlaceOutcome> {
    return this.containers.transaction(async (tx) => {
      const machines = await this.machines(tx, request);
      const result: PlacementResult = place(await this.withPoolMinimum(tx, request), machines);
      if (!isPlaced(result)) return { placed: false, reason: result.reason };
      const containerId = `c-${randomUUID()}`;
      const requested: ContainerResources = {
        cpuMillicores: request.cpuMillicores,
        memoryBytes: request.memoryBytes,
        gpuCount: request.gpuCount,
        ...(result.gpuType ? { gpu: result.gpuType } : {}),
        gpuIndexes: result.gpuIndexes,
      };
      await tx.insertScheduled({ id: containerId, deploymentVersionId: versionId, machineId: result.machineId, reason, requested });
      return {
        placed: true,
        containerId,
        machineId: result.machineId,
        gpuIndexes: result.gpuIndexes,
        ...(result.gpuType ? { gpuType: result.gpuType } : {}),
      };
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
