import { Injectable } from '@nestjs/common';
import { ContainersRepository, type NewSandbox, ReputationRepository, SandboxesRepository } from '#tern/persistence';
import { HOLDING_STATES, isPlaced, machineViews, place, type PlacementRequest } from '#tern/placement';

export type SandboxPlacement = { placed: true; machineId: string } | { placed: false; reason: string };

/**
 * Chooses a sandbox's machine the way the scheduler's Placer chooses a container's: in one
 * transaction it locks the pool's machine rows, sums what containers and sandboxes hold there,
 * runs place() (the pool's minimum reputation applied) and inserts the sandbox row on the chosen
 * machine, so a machine is never booked twice over, by either.
 */
@Injectable()
export class SandboxPlacer {
  constructor(
    private readonly containers: ContainersRepository,
    private readonly sandboxes: SandboxesRepository,
    private readonly reputation: ReputationRepository,
  ) {}

  reserve(sandbox: Omit<NewSandbox, 'machineId'>, request: PlacementRequest): Promise<SandboxPlacement> {
    return this.containers.transaction(async (tx) => {
      const rows = await tx.lockMachinesOfPool(request.pool);
      if (!rows.length) return { placed: false, reason: `pool "${request.pool}" has no machines` };
      const ids = rows.map((r) => r.id);
      const held = await tx.resourcesHeldOn(ids, HOLDING_STATES);
      const scores = new Map((await this.reputation.latestScores(ids)).map((s) => [s.machineId, s.score]));
      const poolMin = await tx.poolMinReputation(request.pool);
      const minReputation = Math.max(poolMin ?? 0, request.minReputation ?? 0);
      const result = place({ ...request, ...(minReputation > 0 ? { minReputation } : {}) }, machineViews(rows, held, scores));
      if (!isPlaced(result)) return { placed: false, reason: result.reason };
      await tx.joining(this.sandboxes).insertPlaced({ ...sandbox, machineId: result.machineId });
      return { placed: true, machineId: result.machineId };
    });
  }
}
