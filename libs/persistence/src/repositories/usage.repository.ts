import { Injectable } from '@nestjs/common';
import { SANDBOX_USAGE_DEPLOYMENT } from '#tern/contracts';
import { TransactionalRepository } from './transactional.repository.js';
import { DataSource } from 'typeorm';
import { type MeteredContainer } from '../entities/metered-container.entity.js';
import type { UsageGranularity, UsageGroup, UsageRow } from '#tern/contracts';

/** The container an event is about, as every container event names it. */
export interface MeteredContainerIdentity {
  containerId: string;
  workspaceId: string;
  deploymentId: string;
  deploymentVersion: number;
  machineId: string;
}

/** The allotment `container.started` carries. */
export interface MeteredAllotment {
  cpuMillicores: number;
  memoryBytes: number;
  gpuCount: number;
  gpuType: string | null;
}

/** A metered container as metering works on it: the row without its bookkeeping columns. */
export type MeteredContainerState = Omit<MeteredContainer, 'endReason' | 'updatedAt'>;

/** One usage slice to write: a container's even stretch of its allotment inside one UTC hour. */
export interface UsageSliceRow {
  eventId: string;
  workspaceId: string;
  deploymentId: string;
  containerId: string;
  machineId: string;
  gpuType: string | null;
  gpuCount: number;
  cpuMillicores: number;
  memoryBytes: number;
  /** ISO 8601. */
  periodStart: string;
  periodEnd: string;
  seconds: number;
}

/** A slice a close removed: what the close needs to announce the slices it takes back. */
export interface RemovedSlice {
  eventId: string;
  periodStart: Date;
  seconds: number;
}

/** What a task event says about one attempt. */
export interface TaskAttempt {
  taskId: string;
  attempt: number;
  workspaceId: string;
  deploymentId: string;
  containerId: string | null;
  machineId: string | null;
}

export type UsageGroupBy = UsageGroup;
export type UsageBucket = UsageGranularity;
/** One group's usage in one bucket of the window: the usage API's row. */
export type UsageReportRow = UsageRow;

/** GPU seconds a machine served in a window, with its score as of the window's end (null: never scored). */
export interface MachineGpuSeconds {
  machineId: string;
  gpuSeconds: number;
  score: number | null;
}

const METERED_COLUMNS = `container_id AS "containerId", workspace_id AS "workspaceId", deployment_id AS "deploymentId",
  deployment_version AS "deploymentVersion", machine_id AS "machineId", cpu_millicores AS "cpuMillicores", memory_bytes AS "memoryBytes",
  gpu_count AS "gpuCount", gpu_type AS "gpuType", started_at AS "startedAt", ended_at AS "endedAt", accrued_to AS "accruedTo"`;

type MeteredRow = Omit<MeteredContainerState, 'memoryBytes'> & { memoryBytes: string | number | null };

function metered(r: MeteredRow): MeteredContainerState {
  return { ...r, memoryBytes: r.memoryBytes === null ? null : Number(r.memoryBytes) };
}

/**
 * One row per task attempt. Like containers, the rules do not depend on the order events are
 * seen in: an attempt's outcome only moves running → failed → completed (a completion beats a
 * failure report of the same attempt, e.g. a timeout that raced the result), and two reports
 * of the same outcome merge to the longest duration and latest end.
 */
const FINISH_TASK = `
  INSERT INTO metered_tasks AS t (task_id, attempt, workspace_id, deployment_id, container_id, machine_id, outcome, cause, duration_ms, ended_at)
  SELECT * FROM unnest($1::text[], $2::int[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::bigint[], $10::timestamptz[])
  ON CONFLICT (task_id, attempt) DO UPDATE SET
    container_id = COALESCE(t.container_id, EXCLUDED.container_id),
    machine_id = COALESCE(t.machine_id, EXCLUDED.machine_id),
    outcome = CASE WHEN t.outcome = 'running' OR (t.outcome = 'failed' AND EXCLUDED.outcome = 'completed') THEN EXCLUDED.outcome ELSE t.outcome END,
    cause = CASE WHEN t.outcome = 'running' OR (t.outcome = 'failed' AND EXCLUDED.outcome = 'completed') THEN EXCLUDED.cause
                 WHEN t.outcome = EXCLUDED.outcome THEN LEAST(t.cause, EXCLUDED.cause) ELSE t.cause END,
    duration_ms = CASE WHEN t.outcome = 'running' OR (t.outcome = 'failed' AND EXCLUDED.outcome = 'completed') THEN EXCLUDED.duration_ms
                       WHEN t.outcome = EXCLUDED.outcome THEN GREATEST(t.duration_ms, EXCLUDED.duration_ms) ELSE t.duration_ms END,
    ended_at = CASE WHEN t.outcome = 'running' OR (t.outcome = 'failed' AND EXCLUDED.outcome = 'completed') THEN EXCLUDED.ended_at
                    WHEN t.outcome = EXCLUDED.outcome THEN GREATEST(t.ended_at, EXCLUDED.ended_at) ELSE t.ended_at END,
    updated_at = now()
  RETURNING (xmax = 0) AS inserted`;

/** How an attempt ended, as the gateway accepted it. */
export interface TaskEnd {
  outcome: 'completed' | 'failed';
  cause: string | null;
  durationMs: number | null;
  endedAt: string;
}

/** $1…$6 of the statements on many attempts: one array per column of TaskAttempt. */
function attemptColumns(attempts: TaskAttempt[]): unknown[][] {
  return [
    attempts.map((a) => a.taskId),
    attempts.map((a) => a.attempt),
    attempts.map((a) => a.workspaceId),
    attempts.map((a) => a.deploymentId),
    attempts.map((a) => a.containerId),
    attempts.map((a) => a.machineId),
  ];
}

const SLICE_COLUMNS = 13;

const GPU_KEY = (t: string) => `COALESCE(${t}.gpu_type, CASE WHEN ${t}.gpu_count > 0 THEN 'any' ELSE 'none' END)`;

/** SQL for a group's key over usage_intervals (u) and over metered_tasks (t) joined to metered_containers (c). */
const KEYS: Record<UsageGroupBy, { usage: string; tasks: string }> = {
  workspace: { usage: 'u.workspace_id', tasks: 't.workspace_id' },
  deployment: { usage: 'u.deployment_id', tasks: 't.deployment_id' },
  machine: { usage: 'u.machine_id', tasks: `COALESCE(t.machine_id, 'none')` },
  gpu: { usage: GPU_KEY('u'), tasks: GPU_KEY('c') },
};

function zero() {
  return { gpuSeconds: 0, cpuCoreSeconds: 0, memoryGibSeconds: 0, containerSeconds: 0, tasksCompleted: 0, tasksFailed: 0, taskSeconds: 0 };
}

/** Every statement on usage intervals, metered containers and tasks, and the usage/rewards reports. */
@Injectable()
export class UsageRepository extends TransactionalRepository {
  constructor(db: DataSource) {
    super(db);
  }

  // --- Task attempts (metered_tasks) --------------------------------------------------------

  async recordTaskStarted(a: TaskAttempt, startedAt: string): Promise<void> {
    await this.recordTasksStarted([{ attempt: a, startedAt }]);
  }

  /**
   * Many attempts' starts in one statement. An attempt named twice makes Postgres refuse the
   * statement (ON CONFLICT cannot change a row twice): its caller writes such a batch one by one.
   */
  async recordTasksStarted(starts: { attempt: TaskAttempt; startedAt: string }[]): Promise<void> {
    await this.rows(
      `INSERT INTO metered_tasks AS t (task_id, attempt, workspace_id, deployment_id, container_id, machine_id, outcome, started_at)
       SELECT x.task_id, x.attempt, x.workspace_id, x.deployment_id, x.container_id, x.machine_id, 'running', x.started_at
       FROM unnest($1::text[], $2::int[], $3::text[], $4::text[], $5::text[], $6::text[], $7::timestamptz[])
         AS x(task_id, attempt, workspace_id, deployment_id, container_id, machine_id, started_at)
       ON CONFLICT (task_id, attempt) DO UPDATE SET
         started_at = LEAST(t.started_at, EXCLUDED.started_at),
         container_id = COALESCE(t.container_id, EXCLUDED.container_id),
         machine_id = COALESCE(t.machine_id, EXCLUDED.machine_id),
         updated_at = now()`,
      [...attemptColumns(starts.map((s) => s.attempt)), starts.map((s) => s.startedAt)],
    );
  }

  /** The attempt's end, merged with what is known by the rules of FINISH_TASK. */
  async recordTaskFinished(a: TaskAttempt, end: TaskEnd): Promise<void> {
    await this.recordTasksFinished([{ attempt: a, end }]);
  }

  /** Many attempts' ends in one statement (an attempt named twice: as recordTasksStarted). */
  async recordTasksFinished(ends: { attempt: TaskAttempt; end: TaskEnd }[]): Promise<void> {
    await this.rows(FINISH_TASK, [
      ...attemptColumns(ends.map((e) => e.attempt)),
      ends.map((e) => e.end.outcome),
      ends.map((e) => e.end.cause),
      ends.map((e) => e.end.durationMs),
      ends.map((e) => e.end.endedAt),
    ]);
  }

  // --- Containers (metered_containers) ------------------------------------------------------

  /**
   * Records the start and allotment (upserting, and so locking, the row: run inside
   * transaction()). The earliest start wins; an earlier start than the checkpoints assumed
   * makes the next one rewrite from the start.
   */
  async recordContainerStarted(
    c: MeteredContainerIdentity,
    allotment: MeteredAllotment,
    startedAt: string,
  ): Promise<MeteredContainerState> {
    const [row] = await this.rows<MeteredRow>(
      `INSERT INTO metered_containers AS c (container_id, workspace_id, deployment_id, deployment_version, machine_id,
         cpu_millicores, memory_bytes, gpu_count, gpu_type, started_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
       ON CONFLICT (container_id) DO UPDATE SET
         cpu_millicores = EXCLUDED.cpu_millicores, memory_bytes = EXCLUDED.memory_bytes,
         gpu_count = EXCLUDED.gpu_count, gpu_type = EXCLUDED.gpu_type,
         started_at = LEAST(c.started_at, EXCLUDED.started_at),
         -- An earlier start than the checkpoints assumed: the next one rewrites from the start.
         accrued_to = CASE WHEN EXCLUDED.started_at < c.started_at THEN NULL ELSE c.accrued_to END,
         updated_at = now()
       RETURNING ${METERED_COLUMNS}`,
      [
        c.containerId,
        c.workspaceId,
        c.deploymentId,
        c.deploymentVersion,
        c.machineId,
        allotment.cpuMillicores,
        allotment.memoryBytes,
        allotment.gpuCount,
        allotment.gpuType,
        startedAt,
      ],
    );
    return metered(row);
  }

  /**
   * Records an end of usage at `endedAt` (upserting, and so locking, the row: run inside
   * transaction()). The earliest end wins, and its reason; at the same instant, the reason first in order.
   */
  async recordContainerEnded(c: MeteredContainerIdentity, endedAt: string, reason: string): Promise<MeteredContainerState> {
    const [row] = await this.rows<MeteredRow>(
      `INSERT INTO metered_containers AS c (container_id, workspace_id, deployment_id, deployment_version, machine_id, ended_at, end_reason)
       VALUES ($1, $2, $3, $4, $5, $6, $7)
       ON CONFLICT (container_id) DO UPDATE SET
         end_reason = CASE
           WHEN c.ended_at IS NULL OR EXCLUDED.ended_at < c.ended_at
             OR (EXCLUDED.ended_at = c.ended_at AND EXCLUDED.end_reason < c.end_reason) THEN EXCLUDED.end_reason
           ELSE c.end_reason END,
         ended_at = LEAST(c.ended_at, EXCLUDED.ended_at), updated_at = now()
       RETURNING ${METERED_COLUMNS}`,
      [c.containerId, c.workspaceId, c.deploymentId, c.deploymentVersion, c.machineId, endedAt, reason],
    );
    return metered(row);
  }

  /**
   * Claims up to `limit` running containers (started, allotment known, not ended) with ids after
   * `after`, by id, FOR UPDATE SKIP LOCKED: a container whose event is being applied, or that
   * another replica is accruing, is left out. Run inside transaction(). `now` is the database's
   * clock, shared by every replica.
   */
  async claimRunning(after: string, limit: number): Promise<{ containers: MeteredContainerState[]; now: Date | undefined }> {
    const rows = await this.rows<MeteredRow & { now: Date }>(
      `SELECT ${METERED_COLUMNS}, clock_timestamp() AS now
       FROM metered_containers
       WHERE ended_at IS NULL AND started_at IS NOT NULL AND cpu_millicores IS NOT NULL AND container_id > $1
       ORDER BY container_id LIMIT ${Math.trunc(limit)}
       FOR UPDATE SKIP LOCKED`,
      [after],
    );
    return { containers: rows.map(({ now: _now, ...r }) => metered(r)), now: rows[0]?.now };
  }

  /** Moves the containers' accrued_to forward to `to` (never back). */
  async advanceAccruedTo(containerIds: readonly string[], to: Date): Promise<void> {
    await this.rows(
      `UPDATE metered_containers SET accrued_to = GREATEST(accrued_to, $2::timestamptz) WHERE container_id = ANY($1::text[])`,
      [containerIds, to.toISOString()],
    );
  }

  /** accrued_to = ended_at: the container's usage is written to its end. */
  async markAccruedToEnd(containerId: string): Promise<void> {
    await this.rows(`UPDATE metered_containers SET accrued_to = ended_at WHERE container_id = $1`, [containerId]);
  }

  // --- Usage intervals ----------------------------------------------------------------------

  /** Deletes every slice of the container; returns what was there. */
  removeSlicesOf(containerId: string): Promise<RemovedSlice[]> {
    return this.rows<RemovedSlice>(
      `DELETE FROM usage_intervals WHERE container_id = $1 RETURNING event_id AS "eventId", period_start AS "periodStart", seconds`,
      [containerId],
    );
  }

  /**
   * Upserts slices, keyed on the slice id (container + hour), so writing a slice again replaces
   * it. A slice already closed is left alone by a checkpoint (`closed` false) and replaced by a
   * close (`closed` true).
   */
  async upsertSlices(slices: readonly UsageSliceRow[], closed: boolean): Promise<void> {
    if (!slices.length) return;
    const values: unknown[] = [];
    const tuples = slices.map((s, i) => {
      values.push(
        s.eventId,
        s.workspaceId,
        s.deploymentId,
        s.containerId,
        s.machineId,
        s.gpuType,
        s.gpuCount,
        s.cpuMillicores,
        s.memoryBytes,
        s.periodStart,
        s.periodEnd,
        s.seconds,
        closed,
      );
      const base = i * SLICE_COLUMNS;
      return `(${Array.from({ length: SLICE_COLUMNS }, (_, k) => `$${base + k + 1}`).join(', ')})`;
    });
    await this.rows(
      `INSERT INTO usage_intervals AS u (event_id, workspace_id, deployment_id, container_id, machine_id, gpu_type, gpu_count,
         cpu_millicores, memory_bytes, period_start, period_end, seconds, closed)
       VALUES ${tuples.join(', ')}
       ON CONFLICT (event_id) DO UPDATE SET
         period_start = EXCLUDED.period_start, period_end = EXCLUDED.period_end, seconds = EXCLUDED.seconds,
         closed = EXCLUDED.closed, updated_at = now()
       WHERE EXCLUDED.closed OR NOT u.closed`,
      values,
    );
  }

  // --- Reports ------------------------------------------------------------------------------

  /**
   * Usage and task counts per group and bucket (UTC hours or days of the slice's start; the
   * whole window without `bucket`). A slice is an even stretch of one container's allotment
   * inside one hour, so the part of it inside the window is exact (prorated by time). Sorted by
   * bucket then group; workspace and deployment groups carry their names (deleted ones: null).
   */
  async report(q: {
    from: Date;
    to: Date;
    groupBy: UsageGroupBy;
    bucket: UsageBucket | null;
    workspaceId: string | null;
  }): Promise<UsageReportRow[]> {
    const key = KEYS[q.groupBy];
    const granularity = q.bucket;
    const bucket = (col: string) =>
      granularity ? `date_trunc('${granularity}', ${col} AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'` : `$1::timestamptz`;
    const params = [q.from.toISOString(), q.to.toISOString(), q.workspaceId];
    const usage = await this.rows<{ key: string; bucket: Date; gpu: number; cpu: number; mem: number; secs: number }>(
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
    const tasks = await this.rows<{ key: string; bucket: Date; completed: number; failed: number; secs: number }>(
      `SELECT ${key.tasks} AS key, ${bucket('t.ended_at')} AS bucket,
         COUNT(*) FILTER (WHERE t.outcome = 'completed')::int AS completed, COUNT(*) FILTER (WHERE t.outcome = 'failed')::int AS failed,
         COALESCE(SUM(t.duration_ms), 0)::float8 / 1000 AS secs
       FROM metered_tasks t LEFT JOIN metered_containers c ON c.container_id = t.container_id
       WHERE t.outcome <> 'running' AND t.ended_at >= $1::timestamptz AND t.ended_at < $2::timestamptz AND ($3::text IS NULL OR t.workspace_id = $3)
       GROUP BY 1, 2`,
      params,
    );

    const rows = new Map<string, UsageReportRow>();
    const rowFor = (k: string, b: Date) => {
      const id = `${k}\u0000${b.toISOString()}`;
      let row = rows.get(id);
      if (!row) {
        const end = granularity ? new Date(b.getTime() + (granularity === 'hour' ? 3_600_000 : 86_400_000)) : q.to;
        row = { group: k, name: null, periodStart: b.toISOString(), periodEnd: end.toISOString(), ...zero() };
        rows.set(id, row);
      }
      return row;
    };
    for (const u of usage)
      Object.assign(rowFor(u.key, u.bucket), {
        gpuSeconds: u.gpu,
        cpuCoreSeconds: u.cpu,
        memoryGibSeconds: u.mem,
        containerSeconds: u.secs,
      });
    for (const t of tasks)
      Object.assign(rowFor(t.key, t.bucket), { tasksCompleted: t.completed, tasksFailed: t.failed, taskSeconds: t.secs });

    const sorted = [...rows.values()].sort((a, b) => a.periodStart.localeCompare(b.periodStart) || a.group.localeCompare(b.group));
    await this.name(sorted, q.groupBy);
    return sorted;
  }

  /** GPU seconds each machine served inside the window, with its newest score computed by the window's end. */
  async gpuSecondsByMachine(from: Date, to: Date): Promise<MachineGpuSeconds[]> {
    return this.rows<MachineGpuSeconds>(
      `SELECT s.machine_id AS "machineId", s.gpu AS "gpuSeconds", r.score
       FROM (SELECT machine_id,
               SUM(GREATEST(0, EXTRACT(EPOCH FROM (LEAST(period_end, $2::timestamptz) - GREATEST(period_start, $1::timestamptz)))) * gpu_count)::float8 AS gpu
             FROM usage_intervals WHERE period_end > $1::timestamptz AND period_start < $2::timestamptz GROUP BY machine_id) s
       LEFT JOIN LATERAL (SELECT score FROM reputation_scores rs WHERE rs.machine_id = s.machine_id AND rs.computed_at <= $2::timestamptz
                          ORDER BY rs.computed_at DESC LIMIT 1) r ON true`,
      [from.toISOString(), to.toISOString()],
    );
  }

  /** Fills in workspace and deployment names; rows of deleted ones keep their id only. */
  private async name(rows: UsageReportRow[], groupBy: UsageGroupBy): Promise<void> {
    const table = groupBy === 'workspace' ? 'workspaces' : groupBy === 'deployment' ? 'deployments' : null;
    if (!table || !rows.length) return;
    const ids = [...new Set(rows.map((r) => r.group))];
    const names = await this.rows<{ id: string; name: string }>(
      `SELECT id::text AS id, name FROM ${table} WHERE id::text = ANY($1::text[])`,
      [ids],
    );
    const byId = new Map(names.map((n) => [n.id, n.name]));
    // Sandboxes are metered under one deployment id of their own (SANDBOX_USAGE_DEPLOYMENT).
    for (const r of rows)
      r.name = byId.get(r.group) ?? (groupBy === 'deployment' && r.group === SANDBOX_USAGE_DEPLOYMENT ? 'sandboxes' : null);
  }
}
