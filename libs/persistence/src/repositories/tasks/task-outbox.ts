// The submission outbox: a task saved PENDING first, published to TASKS after, the relay sending what
// a dead gateway left unsent.
import type { DataSource } from 'typeorm';
import { queryPreparedOn, queryRowsOn } from '../../query-rows.js';
import type { NewTask, UnsentTask } from './task-rows.js';

/** $1…$9 of an INSERT of a new task, in the column order of its INSERTs (the submit's and a schedule tick's). */
export function newTaskValues(task: NewTask): unknown[] {
  return [
    task.id,
    task.workspaceId,
    task.deploymentId,
    task.version,
    JSON.stringify(task.payload),
    task.maxRetries,
    task.timeoutSeconds,
    task.ttlSeconds,
    task.callbackUrl,
  ];
}

export const UNSENT_COLUMNS = `id, workspace_id AS "workspaceId", deployment_id AS "deploymentId", deployment_version AS version, payload, max_retries AS "maxRetries",
  timeout_seconds AS "timeoutSeconds", ttl_seconds AS "ttlSeconds", callback_url AS "callbackUrl", created_at AS "createdAt"`;

/**
 * createPending for many tasks in one INSERT: per deployment, the tasks waiting are counted
 * once and the new ones are taken in order while they fit under their maxPending.
 */
export async function createPendingMany(
  db: DataSource,
  items: { task: NewTask; maxPending: number }[],
): Promise<(UnsentTask | undefined)[]> {
  const columns: unknown[][] = Array.from({ length: 10 }, () => []);
  for (const { task, maxPending } of items) [...newTaskValues(task), maxPending].forEach((v, i) => columns[i].push(v));
  const rows = await queryPreparedOn<UnsentTask>(
    db,
    'tasks_create_pending',
    `WITH x AS (SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::int[], $5::text[], $6::int[], $7::int[], $8::int[], $9::text[], $10::int[])
                  WITH ORDINALITY AS x(id, workspace_id, deployment_id, version, payload, max_retries, timeout_seconds, ttl_seconds, callback_url, max_pending, n)),
          waiting AS (SELECT deployment_id, count(*) AS n FROM tasks
                      WHERE deployment_id IN (SELECT deployment_id FROM x) AND state IN ('PENDING', 'RETRY') GROUP BY deployment_id),
          ranked AS (SELECT x.*, row_number() OVER (PARTITION BY x.deployment_id ORDER BY x.n) AS k FROM x)
     INSERT INTO tasks (id, workspace_id, deployment_id, deployment_version, state, payload, max_retries, timeout_seconds, ttl_seconds, callback_url)
     SELECT r.id, r.workspace_id, r.deployment_id, r.version, 'PENDING', r.payload::jsonb, r.max_retries, r.timeout_seconds, r.ttl_seconds, r.callback_url
     FROM ranked r LEFT JOIN waiting w ON w.deployment_id = r.deployment_id
     WHERE coalesce(w.n, 0) + r.k <= r.max_pending
     RETURNING ${UNSENT_COLUMNS}`,
    columns,
  );
  const saved = new Map(rows.map((r) => [r.id, r]));
  return items.map(({ task }) => saved.get(task.id));
}

/**
 * markEnqueued for many tasks in one statement; answers the ids it marked (those not marked
 * before). The rows are locked in id order, as the batched starts and results lock theirs: a
 * task's start may be recorded while its mark is, and two batches locking in different orders
 * would deadlock (Postgres would break it after a second, failing one batch).
 */
export async function markEnqueuedMany(db: DataSource, taskIds: string[], streamSeqs: number[]): Promise<Set<string>> {
  const rows = await queryPreparedOn<{ id: string }>(
    db,
    'tasks_mark_enqueued',
    `WITH x AS (SELECT * FROM unnest($1::uuid[], $2::bigint[]) AS x(id, seq)),
          locked AS (SELECT t.id FROM tasks t JOIN x ON x.id = t.id WHERE t.enqueued_at IS NULL ORDER BY t.id FOR UPDATE OF t)
     UPDATE tasks t SET enqueued_at = now(), stream_seq = x.seq FROM locked JOIN x ON x.id = locked.id
     WHERE t.id = locked.id AND t.enqueued_at IS NULL RETURNING t.id`,
    [taskIds, streamSeqs],
  );
  return new Set(rows.map((r) => r.id));
}

/** Pending tasks saved over olderThanSeconds ago and never published (their gateway died in between), oldest first. */
export function listUnsent(db: DataSource, olderThanSeconds: number, limit = 200): Promise<UnsentTask[]> {
  return queryRowsOn<UnsentTask>(
    db,
    `SELECT ${UNSENT_COLUMNS}
     FROM tasks WHERE enqueued_at IS NULL AND state = 'PENDING' AND created_at < now() - $1 * interval '1 second'
     ORDER BY created_at LIMIT $2`,
    [olderThanSeconds, limit],
  );
}
