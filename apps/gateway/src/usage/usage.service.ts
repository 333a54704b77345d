import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { computeRewards, type MachineReward, NEUTRAL_SCORE } from '#tern/metering';
import { queryRows } from '#tern/persistence';
import { type UsageGranularity, type UsageGroup } from './dto/usage.query.js';
import { type UsageWindow } from './usage-window.js';

export interface UsageRow {
  /** The group's key: a workspace, deployment or machine id, or a GPU type ("none" without GPUs, "any" for GPUs of no stated type). */
  group: string;
  /** Workspace or deployment name, when the group has one. */
  name: string | null;
  periodStart: string;
  periodEnd: string;
  gpuSeconds: number;
  cpuCoreSeconds: number;
  memoryGibSeconds: number;
  /** Seconds containers ran, whatever they held. */
  containerSeconds: number;
  tasksCompleted: number;
  tasksFailed: number;
  /** Sum of the durations of the task attempts that ended in the period. */
  taskSeconds: number;
}

export interface UsageReport {
  from: string;
  to: string;
  groupBy: UsageGroup;
  granularity: UsageGranularity | null;
  workspace: string | null;
  rows: UsageRow[];
  totals: Omit<UsageRow, 'group' | 'name' | 'periodStart' | 'periodEnd'>;
}

export interface RewardsReport {
  from: string;
  to: string;
  formula: string;
  neutralScore: number;
  totalGpuSeconds: number;
  machines: MachineReward[];
}

const GPU_KEY = (t: string) => `COALESCE(${t}.gpu_type, CASE WHEN ${t}.gpu_count > 0 THEN 'any' ELSE 'none' END)`;

/** SQL for a group's key over usage_intervals (u) and over metered_tasks (t) joined to metered_containers (c). */
const KEYS: Record<UsageGroup, { usage: string; tasks: string }> = {
  workspace: { usage: 'u.workspace_id', tasks: 't.workspace_id' },
  deployment: { usage: 'u.deployment_id', tasks: 't.deployment_id' },
  machine: { usage: 'u.machine_id', tasks: `COALESCE(t.machine_id, 'none')` },
  gpu: { usage: GPU_KEY('u'), tasks: GPU_KEY('c') },
};

const FORMULA = 'weight(m) = gpuSeconds(m) × score(m); share(m) = weight(m) / Σ weight; reward(m) = share(m) × amount';

/**
 * Answers usage questions from what metering wrote. A slice is an even stretch of one
 * container's allotment inside one hour, so the part of it inside the window is exact
 * (prorated by time); buckets are UTC hours or days of the slice's start.
 */
@Injectable()
export class UsageService {
  constructor(private readonly dataSource: DataSource) {}

  async usage(window: UsageWindow, groupBy: UsageGroup, granularity: UsageGranularity | null, workspace: string | null): Promise<UsageReport> {
    const key = KEYS[groupBy];
    const bucket = (col: string) => (granularity ? `date_trunc('${granularity}', ${col} AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'` : `$1::timestamptz`);
    const params = [window.from.toISOString(), window.to.toISOString(), workspace];
    const usage = await this.query<{ key: string; bucket: Date; gpu: number; cpu: number; mem: number; secs: number }>(
      `SELECT key, bucket, SUM(overlap * gpu_count)::float8 AS gpu, SUM(overlap * cpu_millicores / 1000.0)::float8 AS cpu,
         SUM(overlap * memory_bytes / 1073741824.0)::float8 AS mem, SUM(overlap)::float8 AS secs
       FROM (SELECT ${key.usage} AS key, ${bucket('u.period_start')} AS bucket, u.gpu_count, u.cpu_millicores, u.memory_bytes,
               EXTRACT(EPOCH FROM (LEAST(u.period_end, $2::timestamptz) - GREATEST(u.period_start, $1::timestamptz)))::float8 AS overlap
             FROM usage_intervals u
             WHERE u.period_end > $1::timestamptz AND u.period_start < $2::timestamptz AND ($3::text IS NULL OR u.workspace_id = $3)) s
       WHERE overlap > 0
       GROUP BY key, bucket`,
      params,
    );
    const tasks = await this.query<{ key: string; bucket: Date; completed: number; failed: number; secs: number }>(
      `SELECT ${key.tasks} AS key, ${bucket('t.ended_at')} AS bucket,
         COUNT(*) FILTER (WHERE t.outcome = 'completed')::int AS completed, COUNT(*) FILTER (WHERE t.outcome = 'failed')::int AS failed,
         COALESCE(SUM(t.duration_ms), 0)::float8 / 1000 AS secs
       FROM metered_tasks t LEFT JOIN metered_containers c ON c.container_id = t.container_id
       WHERE t.outcome <> 'running' AND t.ended_at >= $1::timestamptz AND t.ended_at < $2::timestamptz AND ($3::text IS NULL OR t.workspace_id = $3)
       GROUP BY 1, 2`,
      params,
    );

    const rows = new Map<string, UsageRow>();
    const rowFor = (k: string, b: Date) => {
      const id = `${k}\u0000${b.toISOString()}`;
      let row = rows.get(id);
      if (!row) {
        const end = granularity ? new Date(b.getTime() + (granularity === 'hour' ? 3_600_000 : 86_400_000)) : window.to;
        row = { group: k, name: null, periodStart: b.toISOString(), periodEnd: end.toISOString(), ...zero() };
        rows.set(id, row);
      }
      return row;
    };
    for (const u of usage) Object.assign(rowFor(u.key, u.bucket), { gpuSeconds: u.gpu, cpuCoreSeconds: u.cpu, memoryGibSeconds: u.mem, containerSeconds: u.secs });
    for (const t of tasks) Object.assign(rowFor(t.key, t.bucket), { tasksCompleted: t.completed, tasksFailed: t.failed, taskSeconds: t.secs });

    const sorted = [...rows.values()].sort((a, b) => a.periodStart.localeCompare(b.periodStart) || a.group.localeCompare(b.group));
    await this.name(sorted, groupBy);
    const totals = zero();
    for (const r of sorted) for (const k of Object.keys(totals) as (keyof typeof totals)[]) totals[k] += r[k];
    return {
      from: window.from.toISOString(),
      to: window.to.toISOString(),
      groupBy,
      granularity,
      workspace,
      rows: sorted,
      totals,
    };
  }

  async rewards(window: UsageWindow, amount?: number): Promise<RewardsReport> {
    const served = await this.query<{ machine_id: string; gpu: number; score: number | null }>(
      `SELECT s.machine_id, s.gpu, r.score
       FROM (SELECT machine_id,
               SUM(GREATEST(0, EXTRACT(EPOCH FROM (LEAST(period_end, $2::timestamptz) - GREATEST(period_start, $1::timestamptz)))) * gpu_count)::float8 AS gpu
             FROM usage_intervals WHERE period_end > $1::timestamptz AND period_start < $2::timestamptz GROUP BY machine_id) s
       LEFT JOIN LATERAL (SELECT score FROM reputation_scores rs WHERE rs.machine_id = s.machine_id AND rs.computed_at <= $2::timestamptz
                          ORDER BY rs.computed_at DESC LIMIT 1) r ON true`,
      [window.from.toISOString(), window.to.toISOString()],
    );
    const machines = computeRewards(served.map((m) => ({ machineId: m.machine_id, gpuSeconds: m.gpu, score: m.score })), amount);
    return {
      from: window.from.toISOString(),
      to: window.to.toISOString(),
      formula: FORMULA,
      neutralScore: NEUTRAL_SCORE,
      totalGpuSeconds: machines.reduce((sum, m) => sum + m.gpuSeconds, 0),
      machines,
    };
  }

  /** Fills in workspace and deployment names; rows of deleted ones keep their id only. */
  private async name(rows: UsageRow[], groupBy: UsageGroup): Promise<void> {
    const table = groupBy === 'workspace' ? 'workspaces' : groupBy === 'deployment' ? 'deployments' : null;
    if (!table || !rows.length) return;
    const ids = [...new Set(rows.map((r) => r.group))];
    const names = await this.query<{ id: string; name: string }>(`SELECT id::text AS id, name FROM ${table} WHERE id::text = ANY($1::text[])`, [ids]);
    const byId = new Map(names.map((n) => [n.id, n.name]));
    for (const r of rows) r.name = byId.get(r.group) ?? null;
  }

  private async query<T>(sql: string, params: unknown[]): Promise<T[]> {
    const runner = this.dataSource.createQueryRunner();
    try {
      return await queryRows<T>(runner, sql, params);
    } finally {
      await runner.release();
    }
  }
}

function zero() {
  return { gpuSeconds: 0, cpuCoreSeconds: 0, memoryGibSeconds: 0, containerSeconds: 0, tasksCompleted: 0, tasksFailed: 0, taskSeconds: 0 };
}
