import { Injectable } from '@nestjs/common';
import { DataSource, type EntityManager } from 'typeorm';
import type { TaskState } from '#tern/contracts';
import { FINAL_TASK_STATES, type LeaseClaim, type TaskLease } from '#tern/tasks';
import type { Task } from '../entities/task.entity.js';
import { GroupCommit } from '../group-commit.js';
import { queryPreparedOn, queryRows, queryRowsOn } from '../query-rows.js';

/** A task as the task API shows it: its row and its deployment's name; `result` only when asked for. */
export type TaskWithDeployment = Pick<
  Task,
  | 'id'
  | 'workspaceId'
  | 'deploymentId'
  | 'version'
  | 'state'
  | 'result'
  | 'resultRef'
  | 'error'
  | 'attempts'
  | 'maxRetries'
  | 'timeoutSeconds'
  | 'ttlSeconds'
  | 'callbackUrl'
  | 'callbackState'
  | 'callbackAttempts'
  | 'callbackError'
  | 'containerId'
  | 'machineId'
  | 'streamSeq'
  | 'createdAt'
  | 'startedAt'
  | 'endedAt'
  | 'updatedAt'
> & { deploymentName: string };

/** What a task is published to TASKS from: by the submit, and by the relay for one saved but never sent. */
export type UnsentTask = Pick<
  Task,
  'id' | 'workspaceId' | 'deploymentId' | 'version' | 'maxRetries' | 'timeoutSeconds' | 'ttlSeconds' | 'callbackUrl' | 'createdAt'
> & {
  payload: Record<string, unknown>;
};

/** A task to accept: its id is chosen by the caller (it becomes the TASKS message id). */
export type NewTask = Omit<UnsentTask, 'createdAt'>;

/** The row before an attempt's start was recorded: the attempt it replaced may have been lost. */
export interface StartedOver {
  was: TaskState;
  wasAttempt: number;
  wasMachine: string | null;
  wasContainer: string | null;
  /** When the attempt before was seen to start. */
  wasStartedAt: Date | null;
  workspaceId: string;
  deploymentId: string;
}

/** The attempt an outcome settled, as the tasks table knows it (never as the reporter says). */
export interface SettledAttempt {
  workspaceId: string;
  deploymentId: string;
  machineId: string | null;
  containerId: string | null;
  /** When the attempt was seen to start (its lease); null when it never was. */
  startedAt: Date | null;
}

const SETTLED = `workspace_id AS "workspaceId", deployment_id AS "deploymentId", machine_id AS "machineId", container_id AS "containerId", started_at AS "startedAt"`;

/** An attempt's start as the gateway records it (startedAt: when the event reached NATS). */
export interface StartedAttempt {
  taskId: string;
  attempt: number;
  startedAt: string;
  containerId: string;
  machineId: string;
}

/** An attempt's result: inline JSON text, or where it was put. */
export interface Completion {
  taskId: string;
  resultJson: string | null;
  resultRef: string | null;
  attempt: number;
  completedAt: string;
  containerId: string;
  machineId: string;
}

/** A task just made final by a sweep or a cancel: where its TASKS message sits (null: never published). */
export interface EndedTask {
  id: string;
  workspaceId: string;
  streamSeq: number | null;
  endedAt: Date;
}

export interface CancelledTask extends EndedTask {
  /** The state it was in: RUNNING means an agent must stop it. */
  was: TaskState;
  /** The machine holding the lease of its last started attempt, told to stop it (null: never started). */
  machineId: string | null;
  attempts: number;
  deploymentId: string;
  version: number;
}

export interface TaskListFilter {
  deploymentName?: string;
  states?: TaskState[];
  /** Keyset: only tasks older than this one (newest first). */
  before?: { createdAt: string; id: string };
}

/** Due callbacks claimed in one transaction; each outcome is recorded in it before the claim ends. */
export interface CallbackClaim {
  tasks: TaskWithDeployment[];
  markDelivered(taskId: string, attempts: number): Promise<void>;
  /** retryInMs null: gave up (callback_state failed); `error` says what went wrong, shown with the task. */
  markAttemptFailed(taskId: string, attempts: number, retryInMs: number | null, error: string): Promise<void>;
}

/** One row of TasksRepository.activity: a count of tasks submitted or ended in the step at `at`, or now in `state`. */
export interface TaskActivityRow {
  kind: 'submitted' | 'ended' | 'now';
  at: Date | null;
  state: TaskState | null;
  count: number;
}

/** How long a task's enqueued mark waits before its statement (see enqueuedMarks). */
export const ENQUEUED_MARK_LINGER_MS = 50;

const FINAL = `(${FINAL_TASK_STATES.map((s) => `'${s}'`).join(', ')})`;
/** On reaching a final state: a callback is due now when the task has a URL. */
const CALLBACK_DUE = `callback_state = CASE WHEN callback_url IS NULL THEN NULL ELSE 'pending' END, callback_next_at = CASE WHEN callback_url IS NULL THEN NULL ELSE now() END`;

/** The columns of a TaskWithDeployment, the deployment's name taken from `deploymentName` (an SQL expression). */
const taskColumns = (
  deploymentName: string,
) => `t.id, t.workspace_id AS "workspaceId", t.deployment_id AS "deploymentId", ${deploymentName} AS "deploymentName", t.deployment_version AS version, t.state,
  t.result_ref AS "resultRef", t.error, t.attempts, t.max_retries AS "maxRetries", t.timeout_seconds AS "timeoutSeconds", t.ttl_seconds AS "ttlSeconds",
  t.callback_url AS "callbackUrl", t.callback_state AS "callbackState", t.callback_attempts AS "callbackAttempts", t.callback_error AS "callbackError", t.container_id AS "containerId",
  t.machine_id AS "machineId", t.stream_seq AS "streamSeq", t.created_at AS "createdAt", t.started_at AS "startedAt", t.ended_at AS "endedAt", t.updated_at AS "updatedAt"`;
const TASK_COLUMNS = taskColumns('d.name');
/** The container $4 was placed by the scheduler on machine $5 for the deployment version of the task (row of tasks). */
const PLACED = `EXISTS (SELECT 1 FROM containers c JOIN deployment_versions v ON v.id = c.deployment_version_id
  WHERE c.id = $4 AND c.machine_id = $5 AND v.deployment_id = tasks.deployment_id AND v.version = tasks.deployment_version)`;
/** The outcome's reporter ($m machine, $c container, $a attempt) holds the lease of the task's current attempt. */
const leaseHeldBy = (a: number, m: number, c: number) =>
  `attempts = $${a} AND machine_id = $${m} AND container_id IS NOT DISTINCT FROM $${c}`;
const TASK_FROM = `tasks t JOIN deployments d ON d.id = t.deployment_id`;
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

/** bigint arrives as text (see numberFromText); stream sequences stay far below 2^53. */
function seq(value: string | number | null): number | null {
  return value === null ? null : Number(value);
}

/** A row as the driver answers it: stream_seq (bigint) as text. */
type Raw<T extends { streamSeq: number | null }> = Omit<T, 'streamSeq'> & { streamSeq: string | null };

/**
 * The rows of a batched statement (each with its item's 1-based ordinal `n`) by item, each read
 * with `as` (the row as it is by default); undefined for an item no row answers.
 */
function inOrder<R, T = R>(
  count: number,
  rows: (R & { n: string | number })[],
  as: (row: R) => T = (row) => row as unknown as T,
): (T | undefined)[] {
  const byItem: (T | undefined)[] = new Array(count).fill(undefined);
  for (const { n, ...row } of rows) byItem[Number(n) - 1] = as(row as R);
  return byItem;
}

function withSeq<T extends { streamSeq: number | null }>(row: Raw<T>): T {
  return { ...row, streamSeq: seq(row.streamSeq) } as T;
}

/**
 * Every statement on tasks (the task state machine, the submission outbox, TTL expiry,
 * callbacks). Events may arrive twice and out of order, so every transition is one
 * conditional UPDATE: a final state is never left, the first completion wins, and an
 * attempt's event never overwrites a later attempt's.
 */
@Injectable()
export class TasksRepository {
  constructor(private readonly db: DataSource) {}

  /** Submits arriving together are saved by one statement (see createPendingMany). */
  private readonly pendingSaves = new GroupCommit<{ task: NewTask; maxPending: number }, UnsentTask | undefined>((items) =>
    this.createPendingMany(items),
  );
  /**
   * Sends recorded together: one statement for the tasks that reached TASKS meanwhile. Nobody
   * waits on a mark (the relay looks only at rows saved seconds ago; a cancel on the sending
   * gateway asks it for the sequence), and a mark made at once landed as the task's start was
   * recorded, locking the same row: at concurrency 1 the start waited for it. So marks linger a
   * little, and go after a quick task's start, many in one statement.
   */
  private readonly enqueuedMarks = new GroupCommit<{ taskId: string; streamSeq: number }, boolean>(
    async (marks) => {
      const marked = await this.markEnqueuedMany(
        marks.map((m) => m.taskId),
        marks.map((m) => m.streamSeq),
      );
      return marks.map((m) => marked.has(m.taskId));
    },
    { lingerMs: ENQUEUED_MARK_LINGER_MS },
  );

  /** Starts recorded together: one statement for the attempts that started meanwhile. */
  private readonly startMarks = new GroupCommit<StartedAttempt, StartedOver | undefined>((starts) => this.markStartedMany(starts), {
    keyOf: (e) => e.taskId,
  });
  /** Results recorded together: one statement for the attempts that completed meanwhile. */
  private readonly completions = new GroupCommit<Completion, TaskWithDeployment | undefined>(
    (completions) => this.completeMany(completions),
    { keyOf: (e) => e.taskId },
  );

  /** Task reads (a GroupCommit of reads: the same coalescing, nothing written). */
  private readonly reads = new GroupCommit<{ taskId: string; workspaceId: string }, TaskWithDeployment | undefined>((asked) =>
    this.findManyInWorkspaces(asked, false),
  );
  private readonly readsWithResult = new GroupCommit<{ taskId: string; workspaceId: string }, TaskWithDeployment | undefined>((asked) =>
    this.findManyInWorkspaces(asked, true),
  );

  /**
   * Saves a PENDING task unless its deployment already has maxPending tasks waiting; undefined
   * then. The bound and the insert in one statement, shared with the submits that arrive while
   * the one before is written (concurrent submits through several gateways may overshoot it by a few).
   */
  createPending(task: NewTask, maxPending: number): Promise<UnsentTask | undefined> {
    return this.pendingSaves.add({ task, maxPending });
  }

  /**
   * createPending for many tasks in one INSERT: per deployment, the tasks waiting are counted
   * once and the new ones are taken in order while they fit under their maxPending.
   */
  private async createPendingMany(items: { task: NewTask; maxPending: number }[]): Promise<(UnsentTask | undefined)[]> {
    const columns: unknown[][] = Array.from({ length: 10 }, () => []);
    for (const { task, maxPending } of items) [...newTaskValues(task), maxPending].forEach((v, i) => columns[i].push(v));
    const rows = await queryPreparedOn<UnsentTask>(
      this.db,
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
  async markEnqueuedMany(taskIds: string[], streamSeqs: number[]): Promise<Set<string>> {
    const rows = await queryPreparedOn<{ id: string }>(
      this.db,
      'tasks_mark_enqueued',
      `WITH x AS (SELECT * FROM unnest($1::uuid[], $2::bigint[]) AS x(id, seq)),
            locked AS (SELECT t.id FROM tasks t JOIN x ON x.id = t.id WHERE t.enqueued_at IS NULL ORDER BY t.id FOR UPDATE OF t)
       UPDATE tasks t SET enqueued_at = now(), stream_seq = x.seq FROM locked JOIN x ON x.id = locked.id
       WHERE t.id = locked.id AND t.enqueued_at IS NULL RETURNING t.id`,
      [taskIds, streamSeqs],
    );
    return new Set(rows.map((r) => r.id));
  }

  /**
   * Records where TASKS stored the task, once (a second send of the same task changes nothing);
   * marks arriving while the one before is written share one statement.
   */
  markEnqueued(taskId: string, streamSeq: number): Promise<boolean> {
    return this.enqueuedMarks.add({ taskId, streamSeq });
  }

  /** Pending tasks saved over olderThanSeconds ago and never published (their gateway died in between), oldest first. */
  listUnsent(olderThanSeconds: number, limit = 200): Promise<UnsentTask[]> {
    return queryRowsOn<UnsentTask>(
      this.db,
      `SELECT ${UNSENT_COLUMNS}
       FROM tasks WHERE enqueued_at IS NULL AND state = 'PENDING' AND created_at < now() - $1 * interval '1 second'
       ORDER BY created_at LIMIT $2`,
      [olderThanSeconds, limit],
    );
  }

  /**
   * An attempt started: RUNNING and its lease recorded (attempt, machine, container), unless the
   * task is final or already on this attempt or a later one, or the container is not one the
   * scheduler placed on that machine for the task's deployment version. Answers the row as it
   * was before, or undefined when nothing changed. Starts arriving while one statement is in
   * flight share the next one.
   */
  markStarted(e: StartedAttempt): Promise<StartedOver | undefined> {
    return this.startMarks.add(e);
  }

  /**
   * markStarted for many attempts (of distinct tasks) in one statement, the rows locked in id
   * order so that two such statements never deadlock on each other.
   */
  private async markStartedMany(starts: StartedAttempt[]): Promise<(StartedOver | undefined)[]> {
    const rows = await queryPreparedOn<StartedOver & { n: string }>(
      this.db,
      'tasks_mark_started',
      `WITH x AS (SELECT * FROM unnest($1::uuid[], $2::int[], $3::timestamptz[], $4::text[], $5::text[])
                    WITH ORDINALITY AS x(id, attempt, started_at, container_id, machine_id, n)),
            before AS (SELECT t.id, t.state, t.attempts, t.machine_id, t.container_id, t.started_at FROM tasks t JOIN x ON x.id = t.id
                       WHERE EXISTS (SELECT 1 FROM containers c JOIN deployment_versions v ON v.id = c.deployment_version_id
                                     WHERE c.id = x.container_id AND c.machine_id = x.machine_id AND v.deployment_id = t.deployment_id AND v.version = t.deployment_version)
                       ORDER BY t.id FOR UPDATE OF t)
       UPDATE tasks t SET state = 'RUNNING', attempts = x.attempt, started_at = x.started_at, container_id = x.container_id, machine_id = x.machine_id, updated_at = now()
       FROM before JOIN x ON x.id = before.id WHERE t.id = before.id AND before.state NOT IN ${FINAL} AND before.attempts < x.attempt
       RETURNING x.n, before.state AS was, before.attempts AS "wasAttempt", before.machine_id AS "wasMachine", before.container_id AS "wasContainer", before.started_at AS "wasStartedAt",
         t.workspace_id AS "workspaceId", t.deployment_id AS "deploymentId"`,
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
  async markRetrying(claim: LeaseClaim, error: string): Promise<SettledAttempt | undefined> {
    const rows = await queryRowsOn<SettledAttempt>(
      this.db,
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
  async markFailed(
    claim: LeaseClaim & { state: 'ERROR' | 'TIMEOUT'; error: string; failedAt: string },
  ): Promise<SettledAttempt | undefined> {
    const rows = await queryRowsOn<SettledAttempt>(
      this.db,
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
  async markLastAttemptLost(
    claim: LeaseClaim & { containerId: string; error: string; failedAt: string },
  ): Promise<SettledAttempt | undefined> {
    const rows = await queryRowsOn<SettledAttempt>(
      this.db,
      `UPDATE tasks SET state = 'ERROR', attempts = $2, error = $3, ended_at = $6, ${CALLBACK_DUE}, updated_at = now()
       WHERE id = $1 AND state NOT IN ${FINAL} AND attempts <= $2 AND ${PLACED} RETURNING ${SETTLED}`,
      [claim.taskId, claim.attempt, claim.error, claim.containerId, claim.machineId, claim.failedAt],
    );
    return rows[0];
  }

  /**
   * COMPLETE with its result (inline JSON text, or where it was put), when the reporter holds
   * the lease of the task's current attempt and the task is not final: one completion wins.
   * Answers the task as it now is, result included (what its waiters answer, with no read after
   * this write), or undefined when nothing changed. Results arriving while one statement is in
   * flight share the next one.
   */
  complete(e: Completion): Promise<TaskWithDeployment | undefined> {
    return this.completions.add(e);
  }

  /** complete for many attempts (of distinct tasks) in one statement. */
  private async completeMany(completions: Completion[]): Promise<(TaskWithDeployment | undefined)[]> {
    const rows = await queryPreparedOn<Raw<TaskWithDeployment> & { n: string }>(
      this.db,
      'tasks_complete',
      `WITH x AS (SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::int[], $5::timestamptz[], $6::text[], $7::text[])
                    WITH ORDINALITY AS x(id, result, result_ref, attempt, completed_at, container_id, machine_id, n)),
            locked AS (SELECT t.id FROM tasks t JOIN x ON x.id = t.id ORDER BY t.id FOR UPDATE OF t)
       UPDATE tasks t SET state = 'COMPLETE', result = x.result::jsonb, result_ref = x.result_ref, ended_at = x.completed_at, error = NULL, ${CALLBACK_DUE}, updated_at = now()
       FROM locked JOIN x ON x.id = locked.id
       WHERE t.id = locked.id AND t.state NOT IN ${FINAL} AND t.attempts = x.attempt AND t.machine_id = x.machine_id AND t.container_id IS NOT DISTINCT FROM x.container_id
       RETURNING x.n, ${taskColumns('(SELECT name FROM deployments WHERE id = t.deployment_id)')}, t.result`,
      [
        completions.map((e) => e.taskId),
        completions.map((e) => e.resultJson),
        completions.map((e) => e.resultRef),
        completions.map((e) => e.attempt),
        completions.map((e) => e.completedAt),
        completions.map((e) => e.containerId),
        completions.map((e) => e.machineId),
      ],
    );
    return inOrder(completions.length, rows, withSeq<TaskWithDeployment>);
  }

  /** The task's lease as it stands (to say why an outcome was not believed); undefined for an unknown task. */
  /**
   * The attempt a lease holder settled already, when the task ended in one of `states` with the
   * claimant holding its last attempt's lease: a repeat of that holder's outcome (redelivered after
   * a crash between recording it and telling metering), so the fact can be told again.
   */
  async settledBy(claim: LeaseClaim, states: readonly TaskState[]): Promise<SettledAttempt | undefined> {
    const rows = await queryRowsOn<SettledAttempt>(
      this.db,
      `SELECT ${SETTLED} FROM tasks WHERE id = $1 AND state = ANY($5::text[]) AND ${leaseHeldBy(2, 3, 4)}`,
      [claim.taskId, claim.attempt, claim.machineId, claim.containerId ?? null, states],
    );
    return rows[0];
  }

  async leaseOf(taskId: string): Promise<TaskLease | undefined> {
    const rows = await queryRowsOn<TaskLease>(
      this.db,
      `SELECT state, attempts, machine_id AS "machineId", container_id AS "containerId" FROM tasks WHERE id = $1`,
      [taskId],
    );
    return rows[0];
  }

  /** Cancels a task of the workspace not yet final; undefined when it was final already (or is not there). */
  async cancel(taskId: string, workspaceId: string): Promise<CancelledTask | undefined> {
    const rows = await queryRowsOn<Raw<CancelledTask>>(
      this.db,
      `WITH before AS (SELECT id, state, machine_id, attempts FROM tasks WHERE id = $1 AND workspace_id = $2 AND state NOT IN ${FINAL} FOR UPDATE)
       UPDATE tasks t SET state = 'CANCELLED', error = 'cancelled by the user', ended_at = now(), ${CALLBACK_DUE}, updated_at = now()
       FROM before WHERE t.id = before.id
       RETURNING t.id, t.workspace_id AS "workspaceId", before.state AS was, before.machine_id AS "machineId", before.attempts, t.stream_seq AS "streamSeq", t.deployment_id AS "deploymentId", t.deployment_version AS version, t.ended_at AS "endedAt"`,
      [taskId, workspaceId],
    );
    return rows.length ? withSeq<CancelledTask>(rows[0]) : undefined;
  }

  /** Every task of the deployment not yet final becomes CANCELLED with the reason (rows locked in id order, as everywhere). */
  async cancelAllOf(deploymentId: string, reason: string): Promise<EndedTask[]> {
    const rows = await queryRowsOn<Raw<EndedTask>>(
      this.db,
      `UPDATE tasks SET state = 'CANCELLED', error = $2, ended_at = now(), ${CALLBACK_DUE}, updated_at = now()
       WHERE id IN (SELECT id FROM tasks WHERE deployment_id = $1 AND state NOT IN ${FINAL} ORDER BY id FOR UPDATE)
       RETURNING id, workspace_id AS "workspaceId", stream_seq AS "streamSeq", ended_at AS "endedAt"`,
      [deploymentId, reason],
    );
    return rows.map((r) => withSeq<EndedTask>(r));
  }

  /** Pending tasks past their ttl become EXPIRED, oldest first, rows other sweeps hold skipped. */
  async expirePastTtl(limit = 500): Promise<EndedTask[]> {
    const rows = await queryRowsOn<Raw<EndedTask>>(
      this.db,
      `UPDATE tasks SET state = 'EXPIRED', error = 'waited longer than its ttl of ' || ttl_seconds || ' s without starting', ended_at = now(), ${CALLBACK_DUE}, updated_at = now()
       WHERE id IN (SELECT id FROM tasks WHERE state = 'PENDING' AND ttl_seconds IS NOT NULL AND created_at + ttl_seconds * interval '1 second' < now()
                    ORDER BY created_at LIMIT $1 FOR UPDATE SKIP LOCKED)
       RETURNING id, workspace_id AS "workspaceId", stream_seq AS "streamSeq", ended_at AS "endedAt"`,
      [limit],
    );
    return rows.map((r) => withSeq<EndedTask>(r));
  }

  /**
   * One task of the workspace, with its inline result when asked for. Reads asked for while one
   * is in flight (the waits of many callers) share the next statement.
   */
  findInWorkspace(taskId: string, workspaceId: string, withResult: boolean): Promise<TaskWithDeployment | undefined> {
    return (withResult ? this.readsWithResult : this.reads).add({ taskId, workspaceId });
  }

  /** findInWorkspace for many tasks in one statement. */
  private async findManyInWorkspaces(
    asked: { taskId: string; workspaceId: string }[],
    withResult: boolean,
  ): Promise<(TaskWithDeployment | undefined)[]> {
    const rows = await queryPreparedOn<Raw<TaskWithDeployment> & { n: string }>(
      this.db,
      withResult ? 'tasks_find_with_result' : 'tasks_find',
      `SELECT x.n, ${TASK_COLUMNS}${withResult ? ', t.result' : ''}
       FROM unnest($1::uuid[], $2::uuid[]) WITH ORDINALITY AS x(id, workspace_id, n)
       JOIN tasks t ON t.id = x.id AND t.workspace_id = x.workspace_id JOIN deployments d ON d.id = t.deployment_id`,
      [asked.map((a) => a.taskId), asked.map((a) => a.workspaceId)],
    );
    return inOrder(asked.length, rows, withSeq<TaskWithDeployment>);
  }

  /** Tasks of the workspace, newest first, at most `limit` (deleted deployments' left out when filtered by name). */
  async listForWorkspace(workspaceId: string, filter: TaskListFilter, limit: number): Promise<TaskWithDeployment[]> {
    const where = ['t.workspace_id = $1'];
    const args: unknown[] = [workspaceId];
    if (filter.deploymentName) {
      args.push(filter.deploymentName);
      where.push(`d.name = $${args.length} AND d.state <> 'deleted'`);
    }
    if (filter.states?.length) {
      args.push(filter.states);
      where.push(`t.state = ANY($${args.length}::text[])`);
    }
    if (filter.before) {
      args.push(filter.before.createdAt, filter.before.id);
      where.push(`(t.created_at, t.id) < ($${args.length - 1}::timestamptz, $${args.length}::uuid)`);
    }
    args.push(limit);
    const rows = await queryRowsOn<Raw<TaskWithDeployment>>(
      this.db,
      `SELECT ${TASK_COLUMNS} FROM ${TASK_FROM} WHERE ${where.join(' AND ')} ORDER BY t.created_at DESC, t.id DESC LIMIT $${args.length}`,
      args,
    );
    return rows.map((r) => withSeq<TaskWithDeployment>(r));
  }

  /**
   * The workspace's tasks (one deployment's when named) by current state, and per step since
   * `from`: submitted (by created_at) and ended (by ended_at and final state).
   */
  async activity(workspaceId: string, deploymentName: string | undefined, from: Date, stepSeconds: number): Promise<TaskActivityRow[]> {
    return queryRowsOn<TaskActivityRow>(
      this.db,
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
  async durationPercentiles(
    workspaceId: string,
    deploymentName: string | undefined,
    from: Date,
  ): Promise<{ p50: number | null; p95: number | null; p99: number | null }> {
    const [row] = await queryRowsOn<{ p50: number | null; p95: number | null; p99: number | null }>(
      this.db,
      `SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY s) AS p50, percentile_cont(0.95) WITHIN GROUP (ORDER BY s) AS p95,
              percentile_cont(0.99) WITHIN GROUP (ORDER BY s) AS p99
       FROM (SELECT extract(epoch FROM t.ended_at - t.started_at)::float8 AS s FROM ${TASK_FROM}
             WHERE t.workspace_id = $1 AND ($2::text IS NULL OR (d.name = $2 AND d.state <> 'deleted'))
               AND t.ended_at >= $3 AND t.started_at IS NOT NULL) runs`,
      [workspaceId, deploymentName ?? null, from.toISOString()],
    );
    return row;
  }

  /**
   * Claims up to `limit` due callbacks (FOR UPDATE SKIP LOCKED: replicas never claim the same
   * one) and holds them while `work` delivers them; its outcomes are written in the same
   * transaction, which commits when `work` returns.
   */
  async claimCallbacksDue(limit: number, work: (claim: CallbackClaim) => Promise<void>): Promise<void> {
    await this.db.transaction(async (tx: EntityManager) => {
      const runner = tx.queryRunner!;
      const rows = await queryRows<Raw<TaskWithDeployment>>(
        runner,
        `SELECT ${TASK_COLUMNS}, t.result FROM ${TASK_FROM}
         WHERE t.id IN (SELECT id FROM tasks WHERE callback_state = 'pending' AND callback_next_at <= now() ORDER BY callback_next_at LIMIT $1 FOR UPDATE SKIP LOCKED)`,
        [limit],
      );
      await work({
        tasks: rows.map((r) => withSeq<TaskWithDeployment>(r)),
        markDelivered: async (taskId, attempts) => {
          await runner.query(
            `UPDATE tasks SET callback_state = 'delivered', callback_attempts = $2, callback_next_at = NULL, callback_error = NULL WHERE id = $1`,
            [taskId, attempts],
          );
        },
        markAttemptFailed: async (taskId, attempts, retryInMs, error) => {
          // No retry: the delay is null, and so is callback_next_at. ($2 compared with a literal as
          // well as assigned to the varchar column made Postgres refuse the statement.)
          await runner.query(
            `UPDATE tasks SET callback_state = $2, callback_attempts = $3, callback_next_at = now() + $4 * interval '1 millisecond', callback_error = $5
             WHERE id = $1`,
            [taskId, retryInMs === null ? 'failed' : 'pending', attempts, retryInMs, error.slice(0, 1000)],
          );
        },
      });
    });
  }
}
