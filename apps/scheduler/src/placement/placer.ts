import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { DataSource, type QueryRunner } from 'typeorm';
import { type ContainerResources, type MachineGpu, queryRows } from '#tern/persistence';
import { capacityOf, isPlaced, type MachineView, place, type PlacementRequest, type PlacementResult, usageOf } from '#tern/placement';
import { ReputationScores } from './reputation-scores.js';

/** States in which a container holds its machine's resources. */
export const HOLDING_STATES = ['pending', 'scheduled', 'starting', 'running', 'stopping'] as const;

interface MachineRow {
  id: string;
  pool: string;
  state: string;
  cpu_threads: number | null;
  memory_bytes: string | null;
  gpus: MachineGpu[] | null;
}

export type PlaceOutcome = { placed: true; containerId: string; machineId: string; gpuIndexes: number[]; gpuType?: string } | { placed: false; reason: string };

/**
 * Reserves room for one container: in one transaction, locks the pool's machine rows, sums
 * what their containers hold, runs place() and inserts the container row on the chosen
 * machine. Another placement into the pool (this replica's or another's) waits on the locks
 * and then sees the new row, so a machine is never booked twice over.
 */
@Injectable()
export class Placer {
  constructor(
    private readonly dataSource: DataSource,
    private readonly reputation: ReputationScores,
  ) {}

  async reserve(versionId: string, request: PlacementRequest, reason: string): Promise<PlaceOutcome> {
    return this.dataSource.transaction(async (m) => {
      const runner = m.queryRunner!;
      const machines = await this.machines(runner, request.pool);
      const result: PlacementResult = place(await this.withPoolMinimum(runner, request), machines);
      if (!isPlaced(result)) return { placed: false, reason: result.reason };
      const containerId = `c-${randomUUID()}`;
      const requested: ContainerResources = {
        cpuMillicores: request.cpuMillicores,
        memoryBytes: request.memoryBytes,
        gpuCount: request.gpuCount,
        ...(result.gpuType ? { gpu: result.gpuType } : {}),
        gpuIndexes: result.gpuIndexes,
      };
      await runner.query(
        `INSERT INTO containers (id, deployment_version_id, machine_id, state, state_reason, requested) VALUES ($1, $2, $3, 'scheduled', $4, $5::jsonb)`,
        [containerId, versionId, result.machineId, reason, JSON.stringify(requested)],
      );
      return { placed: true, containerId, machineId: result.machineId, gpuIndexes: result.gpuIndexes, ...(result.gpuType ? { gpuType: result.gpuType } : {}) };
    });
  }

  /** The pool's machines, row-locked until the transaction ends, with what they hold and their scores. */
  private async machines(runner: QueryRunner, pool: string): Promise<MachineView[]> {
    const rows = await queryRows<MachineRow>(
      runner,
      `SELECT id, pool, state, cpu_threads, memory_bytes, gpus FROM machines WHERE pool = $1 ORDER BY id FOR UPDATE`,
      [pool],
    );
    if (!rows.length) return [];
    const ids = rows.map((r) => r.id);
    const held = await queryRows<{ machine_id: string; requested: Partial<ContainerResources> }>(
      runner,
      `SELECT machine_id, requested FROM containers WHERE machine_id = ANY($1::text[]) AND state = ANY($2::text[])`,
      [ids, HOLDING_STATES],
    );
    const score = this.reputation.scores() ?? (await this.storedScores(runner, ids));
    return rows.map((r) => {
      const capacity = capacityOf({ cpuThreads: r.cpu_threads, memoryBytes: r.memory_bytes === null ? null : Number(r.memory_bytes), gpus: r.gpus });
      const mine = held.filter((h) => h.machine_id === r.id).map((h) => h.requested ?? {});
      const used = usageOf(mine);
      // A container recorded from events alone has a GPU count but no indexes: count it against the lowest free ones.
      const unindexed = mine.reduce((n, h) => n + (h.gpuIndexes ? 0 : (h.gpuCount ?? 0)), 0);
      const taken = new Set(used.gpuIndexes);
      const extra = capacity.gpus.map((g) => g.index).filter((i) => !taken.has(i)).slice(0, unindexed);
      return {
        id: r.id,
        pool: r.pool,
        state: r.state,
        capacity,
        used: { ...used, gpuIndexes: [...used.gpuIndexes, ...extra] },
        ...(score.has(r.id) ? { reputation: score.get(r.id) } : {}),
      };
    });
  }

  /**
   * The request with the pool's minimum reputation applied too: the stricter of the pool's and
   * the deployment's wins. Only new containers are placed here, so work already running on a
   * machine that falls below either minimum finishes where it is.
   */
  private async withPoolMinimum(runner: QueryRunner, request: PlacementRequest): Promise<PlacementRequest> {
    const [pool] = await queryRows<{ min_reputation: number | null }>(runner, `SELECT min_reputation FROM pools WHERE name = $1`, [request.pool]);
    const poolMin = pool?.min_reputation === null || pool?.min_reputation === undefined ? undefined : Number(pool.min_reputation);
    if (poolMin === undefined) return request;
    return { ...request, minReputation: Math.max(poolMin, request.minReputation ?? 0) };
  }

  /** The newest stored score per machine: the fallback while the reputation bucket is empty. */
  private async storedScores(runner: QueryRunner, ids: string[]): Promise<Map<string, number>> {
    const scores = await queryRows<{ machine_id: string; score: number }>(
      runner,
      `SELECT DISTINCT ON (machine_id) machine_id, score FROM reputation_scores WHERE machine_id = ANY($1::text[]) ORDER BY machine_id, computed_at DESC`,
      [ids],
    );
    return new Map(scores.map((s) => [s.machine_id, Number(s.score)]));
  }
}
