// The task state machine's moves on an agent's word: each one conditional UPDATE, believed only from
// the holder of the attempt's lease (see libs/tasks for the states and the lease rules).
import type { DataSource } from 'typeorm';
import type { TaskState } from '#tern/contracts';
import type { LeaseClaim, TaskLease } from '#tern/tasks';
import { queryPreparedOn, queryRowsOn } from '../../query-rows.js';
import type { Completion, SettledAttempt, StartedAttempt, StartedCompletion, StartedOver, TaskWithDeployment } from './task-rows.js';
import {
  CALLBACK_DUE,
  COMPLETE_SET,
  COMPLETED_TASK,
  FINAL,
  inOrder,
  leaseHeldBy,
  PLACED,
  PLACED_BEFORE,
  type Raw,
  SETTLED,
  START_SET,
  STARTED_OVER,
  STARTS_OVER,
  withSeq,
} from './task-sql.js';

/**
 * markStarted for many attempts (of distinct tasks) in one statement, the rows locked in id
 * order so that two such statements never deadlock on each other.
 */
export async function markStartedMany(db: DataSource, starts: StartedAttempt[]): Promise<(StartedOver | undefined)[]> {
  const rows = await queryPreparedOn<StartedOver & { n: string }>(
    db,
    'tasks_mark_started',
    `WITH x AS (SELECT * FROM unnest($1::uuid[], $2::int[], $3::timestamptz[], $4::text[], $5::text[])
                  WITH ORDINALITY AS x(id, attempt, started_at, container_id, machine_id, n)),
          before AS (${PLACED_BEFORE})
     UPDATE tasks t SET state = 'RUNNING', ${START_SET}
     FROM before JOIN x ON x.id = before.id WHERE t.id = before.id AND ${STARTS_OVER}
     RETURNING x.n, ${STARTED_OVER}, t.workspace_id AS "workspaceId", t.deployment_id AS "deploymentId"`,
    [
      starts.map((e) => e.taskId),
      starts.map((e) => e.attempt),
      starts.map((e) => e.startedAt),
      starts.map((e) => e.containerId),
      starts.map((e) => e.machineId),
    ],
  );
  return inOrder(starts.length, rows);
}

/** An attempt failed and another follows: RETRY, when the reporter holds the attempt's lease and the task is not final. */
export async function markRetrying(db: DataSource, claim: LeaseClaim, error: string): Promise<SettledAttempt | undefined> {
  const rows = await queryRowsOn<SettledAttempt>(
    db,
    `UPDATE tasks SET state = 'RETRY', error = $3, updated_at = now()
     WHERE id = $1 AND state NOT IN ${FINAL} AND ${leaseHeldBy(2, 4, 5)} RETURNING ${SETTLED}`,
    [claim.taskId, claim.attempt, error, claim.machineId, claim.containerId ?? null],
  );
  return rows[0];
}

/**
 * The last attempt failed: ERROR or TIMEOUT, when the reporter holds the attempt's lease and
 * the task is not final; its callback becomes due.
 */
export async function markFailed(
  db: DataSource,
  claim: LeaseClaim & { state: 'ERROR' | 'TIMEOUT'; error: string; failedAt: string },
): Promise<SettledAttempt | undefined> {
  const rows = await queryRowsOn<SettledAttempt>(
    db,
    `UPDATE tasks SET state = $2, error = $4, ended_at = $5, ${CALLBACK_DUE}, updated_at = now()
     WHERE id = $1 AND state NOT IN ${FINAL} AND ${leaseHeldBy(3, 6, 7)} RETURNING ${SETTLED}`,
    [claim.taskId, claim.state, claim.attempt, claim.error, claim.failedAt, claim.machineId, claim.containerId ?? null],
  );
  return rows[0];
}

/**
 * JetStream handed a task to a machine past its last attempt: the attempt before was lost
 * without a word. ERROR, unless the task is final or on a later attempt, or the reporting
 * container is not one the scheduler placed on that machine for the task's version (only such
 * a machine can be handed the task). The lease holder, if any, stays recorded as the one that lost it.
 */
export async function markLastAttemptLost(
  db: DataSource,
  claim: LeaseClaim & { containerId: string; error: string; failedAt: string },
): Promise<SettledAttempt | undefined> {
  const rows = await queryRowsOn<SettledAttempt>(
    db,
    `UPDATE tasks SET state = 'ERROR', attempts = $2, error = $3, ended_at = $6, ${CALLBACK_DUE}, updated_at = now()
     WHERE id = $1 AND state NOT IN ${FINAL} AND attempts <= $2 AND ${PLACED} RETURNING ${SETTLED}`,
    [claim.taskId, claim.attempt, claim.error, claim.containerId, claim.machineId, claim.failedAt],
  );
  return rows[0];
}

/** complete for many attempts (of distinct tasks) in one statement. */
export async function completeMany(db: DataSource, completions: Completion[]): Promise<(TaskWithDeployment | undefined)[]> {
  const rows = await queryPreparedOn<Raw<TaskWithDeployment> & { n: string }>(
    db,
    'tasks_complete',
    `WITH x AS (SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::int[], $5::timestamptz[], $6::text[], $7::text[])
                  WITH ORDINALITY AS x(id, result, result_ref, attempt, completed_at, container_id, machine_id, n)),
          locked AS (SELECT t.id FROM tasks t JOIN x ON x.id = t.id ORDER BY t.id FOR UPDATE OF t)
     UPDATE tasks t SET ${COMPLETE_SET}, updated_at = now()
     FROM locked JOIN x ON x.id = locked.id
     WHERE t.id = locked.id AND t.state NOT IN ${FINAL} AND t.attempts = x.attempt AND t.machine_id = x.machine_id AND t.container_id IS NOT DISTINCT FROM x.container_id
     RETURNING x.n, ${COMPLETED_TASK}`,
    completionColumns(completions),
  );
  return inOrder(completions.length, rows, withSeq<TaskWithDeployment>);
}

/** The parameters of a batch of completions, $1 to $7 of completeMany and startAndCompleteMany. */
function completionColumns(completions: Completion[]): unknown[][] {
  return [
    completions.map((e) => e.taskId),
    completions.map((e) => e.resultJson),
    completions.map((e) => e.resultRef),
    completions.map((e) => e.attempt),
    completions.map((e) => e.completedAt),
    completions.map((e) => e.containerId),
    completions.map((e) => e.machineId),
  ];
}

/**
 * startAndComplete for many attempts (of distinct tasks) in one statement: an attempt that ended
 * before its start was reported (TaskCompleted.withStart). The start's conditions and lease are
 * markStartedMany's (placement, not final, a later attempt than the row's); the result needs no
 * lease check beyond them, since this very statement gives the reporter the lease. Answers the
 * task as it now is and the row as it was before, or undefined when nothing changed.
 */
export async function startAndCompleteMany(
  db: DataSource,
  items: (Completion & { startedAt: string })[],
): Promise<(StartedCompletion | undefined)[]> {
  type Row = Raw<TaskWithDeployment> & Omit<StartedOver, 'workspaceId' | 'deploymentId'> & { n: string };
  const rows = await queryPreparedOn<Row>(
    db,
    'tasks_start_and_complete',
    `WITH x AS (SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::int[], $5::timestamptz[], $6::text[], $7::text[], $8::timestamptz[])
                  WITH ORDINALITY AS x(id, result, result_ref, attempt, completed_at, container_id, machine_id, started_at, n)),
          before AS (${PLACED_BEFORE})
     UPDATE tasks t SET ${COMPLETE_SET}, ${START_SET}
     FROM before JOIN x ON x.id = before.id WHERE t.id = before.id AND ${STARTS_OVER}
     RETURNING x.n, ${STARTED_OVER}, ${COMPLETED_TASK}`,
    [...completionColumns(items), items.map((e) => e.startedAt)],
  );
  return inOrder(items.length, rows, ({ was, wasAttempt, wasMachine, wasContainer, wasStartedAt, ...task }) => ({
    task: withSeq<TaskWithDeployment>(task),
    before: { was, wasAttempt, wasMachine, wasContainer, wasStartedAt, workspaceId: task.workspaceId, deploymentId: task.deploymentId },
  }));
}

/**
 * The attempt a lease holder settled already, when the task ended in one of `states` with the
 * claimant holding its last attempt's lease: a repeat of that holder's outcome (redelivered after
 * a crash between recording it and telling metering), so the fact can be told again.
 */
export async function settledBy(db: DataSource, claim: LeaseClaim, states: readonly TaskState[]): Promise<SettledAttempt | undefined> {
  const rows = await queryRowsOn<SettledAttempt>(
    db,
    `SELECT ${SETTLED} FROM tasks WHERE id = $1 AND state = ANY($5::text[]) AND ${leaseHeldBy(2, 3, 4)}`,
    [claim.taskId, claim.attempt, claim.machineId, claim.containerId ?? null, states],
  );
  return rows[0];
}

/** The task's lease as it stands (to say why an outcome was not believed); undefined for an unknown task. */
export async function leaseOf(db: DataSource, taskId: string): Promise<TaskLease | undefined> {
  const rows = await queryRowsOn<TaskLease>(
    db,
    `SELECT state, attempts, machine_id AS "machineId", container_id AS "containerId" FROM tasks WHERE id = $1`,
    [taskId],
  );
  return rows[0];
}
