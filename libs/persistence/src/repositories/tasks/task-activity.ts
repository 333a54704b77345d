// What the Overview charts: tasks submitted and ended per step, by state, and their run-time
// percentiles.
import type { DataSource } from 'typeorm';
import { queryRowsOn } from '../../query-rows.js';
import type { TaskActivityRow } from './task-rows.js';
import { TASK_FROM } from './task-sql.js';

/**
 * The workspace's tasks (one deployment's when named) by current state, and per step since
 * `from`: submitted (by created_at) and ended (by ended_at and final state).
 */
export async function activity(
  db: DataSource,
  workspaceId: string,
  deploymentName: string | undefined,
  from: Date,
  stepSeconds: number,
): Promise<TaskActivityRow[]> {
  return queryRowsOn<TaskActivityRow>(
    db,
    `WITH scoped AS (SELECT t.state, t.created_at, t.ended_at FROM ${TASK_FROM}
       WHERE t.workspace_id = $1 AND ($2::text IS NULL OR (d.name = $2 AND d.state <> 'deleted')))
     SELECT 'submitted' AS kind, date_bin(make_interval(secs => $4), created_at, $3::timestamptz) AS at, NULL AS state, count(*)::int AS count
       FROM scoped WHERE created_at >= $3 GROUP BY 2
     UNION ALL
     SELECT 'ended', date_bin(make_interval(secs => $4), ended_at, $3::timestamptz), state, count(*)::int
       FROM scoped WHERE ended_at >= $3 GROUP BY 2, 3
     UNION ALL
     SELECT 'now', NULL, state, count(*)::int FROM scoped GROUP BY 3`,
    [workspaceId, deploymentName ?? null, from.toISOString(), stepSeconds],
  );
}

/** Percentiles of the run time (started to ended) of the tasks that ended since `from`; nulls when none did. */
export async function durationPercentiles(
  db: DataSource,
  workspaceId: string,
  deploymentName: string | undefined,
  from: Date,
): Promise<{ p50: number | null; p95: number | null; p99: number | null }> {
  const [row] = await queryRowsOn<{ p50: number | null; p95: number | null; p99: number | null }>(
    db,
    `SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY s) AS p50, percentile_cont(0.95) WITHIN GROUP (ORDER BY s) AS p95,
            percentile_cont(0.99) WITHIN GROUP (ORDER BY s) AS p99
     FROM (SELECT extract(epoch FROM t.ended_at - t.started_at)::float8 AS s FROM ${TASK_FROM}
           WHERE t.workspace_id = $1 AND ($2::text IS NULL OR (d.name = $2 AND d.state <> 'deleted'))
             AND t.ended_at >= $3 AND t.started_at IS NOT NULL) runs`,
    [workspaceId, deploymentName ?? null, from.toISOString()],
  );
  return row;
}
