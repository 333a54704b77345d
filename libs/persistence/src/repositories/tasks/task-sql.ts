// The SQL the statements on tasks share: column lists, conditions, and how their rows are read.
import { FINAL_TASK_STATES } from '#tern/tasks';

/** The columns of a SettledAttempt. */
export const SETTLED = `workspace_id AS "workspaceId", deployment_id AS "deploymentId", machine_id AS "machineId", container_id AS "containerId", started_at AS "startedAt"`;

export const FINAL = `(${FINAL_TASK_STATES.map((s) => `'${s}'`).join(', ')})`;
/** On reaching a final state: a callback is due now when the task has a URL. */
export const CALLBACK_DUE = `callback_state = CASE WHEN callback_url IS NULL THEN NULL ELSE 'pending' END, callback_next_at = CASE WHEN callback_url IS NULL THEN NULL ELSE now() END`;

/** The columns of a TaskWithDeployment, the deployment's name taken from `deploymentName` (an SQL expression). */
export const taskColumns = (
  deploymentName: string,
) => `t.id, t.workspace_id AS "workspaceId", t.deployment_id AS "deploymentId", ${deploymentName} AS "deploymentName", t.deployment_version AS version, t.state,
  t.result_ref AS "resultRef", t.error, t.attempts, t.max_retries AS "maxRetries", t.timeout_seconds AS "timeoutSeconds", t.ttl_seconds AS "ttlSeconds",
  t.callback_url AS "callbackUrl", t.callback_state AS "callbackState", t.callback_attempts AS "callbackAttempts", t.callback_error AS "callbackError", t.container_id AS "containerId",
  t.machine_id AS "machineId", t.spot_check AS "spotCheck", t.stream_seq AS "streamSeq", t.created_at AS "createdAt", t.started_at AS "startedAt", t.ended_at AS "endedAt", t.updated_at AS "updatedAt"`;
export const TASK_COLUMNS = taskColumns('d.name');
/** The container $4 was placed by the scheduler on machine $5 for the deployment version of the task (row of tasks). */
export const PLACED = `EXISTS (SELECT 1 FROM containers c JOIN deployment_versions v ON v.id = c.deployment_version_id
  WHERE c.id = $4 AND c.machine_id = $5 AND v.deployment_id = tasks.deployment_id AND v.version = tasks.deployment_version)`;
/** The outcome's reporter ($m machine, $c container, $a attempt) holds the lease of the task's current attempt. */
export const leaseHeldBy = (a: number, m: number, c: number) =>
  `attempts = $${a} AND machine_id = $${m} AND container_id IS NOT DISTINCT FROM $${c}`;
export const TASK_FROM = `tasks t JOIN deployments d ON d.id = t.deployment_id`;

// A start's pieces, shared by markStartedMany and startAndCompleteMany (whose items, in a CTE `x`,
// carry id, attempt, started_at, container_id and machine_id).
/** The rows of the items' tasks whose container was placed on its machine for the task's version, locked in id order, as they were. */
export const PLACED_BEFORE = `SELECT t.id, t.state, t.attempts, t.machine_id, t.container_id, t.started_at FROM tasks t JOIN x ON x.id = t.id
  WHERE EXISTS (SELECT 1 FROM containers c JOIN deployment_versions v ON v.id = c.deployment_version_id
                WHERE c.id = x.container_id AND c.machine_id = x.machine_id AND v.deployment_id = t.deployment_id AND v.version = t.deployment_version)
  ORDER BY t.id FOR UPDATE OF t`;
/** The start's change: RUNNING's lease (attempt, machine, container) and when it was seen. */
export const START_SET = `attempts = x.attempt, started_at = x.started_at, container_id = x.container_id, machine_id = x.machine_id, updated_at = now()`;
/** A start counts on a task not final whose recorded attempt is an earlier one. */
export const STARTS_OVER = `before.state NOT IN ${FINAL} AND before.attempts < x.attempt`;
/** The row as it was before the start (a StartedOver, less the task's workspace and deployment). */
export const STARTED_OVER = `before.state AS was, before.attempts AS "wasAttempt", before.machine_id AS "wasMachine", before.container_id AS "wasContainer", before.started_at AS "wasStartedAt"`;
/** The result's change: COMPLETE, its result, and its callback due. */
export const COMPLETE_SET = `state = 'COMPLETE', result = x.result::jsonb, result_ref = x.result_ref, ended_at = x.completed_at, error = NULL, ${CALLBACK_DUE}`;
/** The columns a completion answers: the task as its waiters answer it, result included. */
export const COMPLETED_TASK = `${taskColumns('(SELECT name FROM deployments WHERE id = t.deployment_id)')}, t.result`;

/** bigint arrives as text (see numberFromText); stream sequences stay far below 2^53. */
function seq(value: string | number | null): number | null {
  return value === null ? null : Number(value);
}

/** A row as the driver answers it: stream_seq (bigint) as text. */
export type Raw<T extends { streamSeq: number | null }> = Omit<T, 'streamSeq'> & { streamSeq: string | null };

/**
 * The rows of a batched statement (each with its item's 1-based ordinal `n`) by item, each read
 * with `as` (the row as it is by default); undefined for an item no row answers.
 */
export function inOrder<R, T = R>(
  count: number,
  rows: (R & { n: string | number })[],
  as: (row: R) => T = (row) => row as unknown as T,
): (T | undefined)[] {
  const byItem: (T | undefined)[] = new Array(count).fill(undefined);
  for (const { n, ...row } of rows) byItem[Number(n) - 1] = as(row as R);
  return byItem;
}

export function withSeq<T extends { streamSeq: number | null }>(row: Raw<T>): T {
  return { ...row, streamSeq: seq(row.streamSeq) } as T;
}
