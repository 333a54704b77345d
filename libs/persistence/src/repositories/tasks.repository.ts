import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { LeaseClaim, TaskLease } from '#tern/tasks';
import type { TaskSpotCheckRecord, TaskState } from '#tern/contracts';
import { GroupCommit } from '#tern/timing';
import * as activity from './tasks/task-activity.js';
import * as callbacks from './tasks/task-callbacks.js';
import * as endings from './tasks/task-endings.js';
import * as outbox from './tasks/task-outbox.js';
import * as reads from './tasks/task-reads.js';
import * as spotChecks from './tasks/task-spot-checks.js';
import type {
  CallbackClaim,
  CancelledTask,
  Completion,
  EndedTask,
  NewTask,
  SettledAttempt,
  StartedAttempt,
  StartedCompletion,
  StartedOver,
  TaskActivityRow,
  TaskListFilter,
  TaskWithDeployment,
  UnsentTask,
} from './tasks/task-rows.js';
import * as transitions from './tasks/task-transitions.js';

export type * from './tasks/task-rows.js';
export type { PendingSpotCheck, SpotCheckOfTask } from './tasks/task-spot-checks.js';
export { newTaskValues, UNSENT_COLUMNS } from './tasks/task-outbox.js';

/** How long a task's enqueued mark waits before its statement (see enqueuedMarks). */
export const ENQUEUED_MARK_LINGER_MS = 50;

/**
 * Every statement on tasks, by concern in tasks/: the submission outbox, the state machine's
 * transitions, endings (cancel, TTL expiry), reads, activity, callbacks. Events may arrive twice
 * and out of order, so every transition is one conditional UPDATE: a final state is never left,
 * the first completion wins, and an attempt's event never overwrites a later attempt's. What
 * arrives together shares one statement: the batchers below (GroupCommit) hold the waiting.
 */
@Injectable()
export class TasksRepository {
  constructor(private readonly db: DataSource) {}

  /** Submits arriving together are saved by one statement (see task-outbox.ts). */
  private readonly pendingSaves = new GroupCommit<{ task: NewTask; maxPending: number }, UnsentTask | undefined>((items) =>
    outbox.createPendingMany(this.db, items),
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
      const marked = await outbox.markEnqueuedMany(
        this.db,
        marks.map((m) => m.taskId),
        marks.map((m) => m.streamSeq),
      );
      return marks.map((m) => marked.has(m.taskId));
    },
    { lingerMs: ENQUEUED_MARK_LINGER_MS },
  );

  /** Starts recorded together: one statement for the attempts that started meanwhile. */
  private readonly startMarks = new GroupCommit<StartedAttempt, StartedOver | undefined>(
    (starts) => transitions.markStartedMany(this.db, starts),
    {
      keyOf: (e) => e.taskId,
    },
  );
  /** Results recorded together: one statement for the attempts that completed meanwhile. */
  private readonly completions = new GroupCommit<Completion, TaskWithDeployment | undefined>(
    (completions) => transitions.completeMany(this.db, completions),
    { keyOf: (e) => e.taskId },
  );

  /** Attempts that ended before their start was reported, together: one statement for their starts and results. */
  private readonly startedCompletions = new GroupCommit<Completion & { startedAt: string }, StartedCompletion | undefined>(
    (items) => transitions.startAndCompleteMany(this.db, items),
    { keyOf: (e) => e.taskId },
  );

  /** Task reads (a GroupCommit of reads: the same coalescing, nothing written). */
  private readonly reads = new GroupCommit<{ taskId: string; workspaceId: string }, TaskWithDeployment | undefined>((asked) =>
    reads.findManyInWorkspaces(this.db, asked, false),
  );
  private readonly readsWithResult = new GroupCommit<{ taskId: string; workspaceId: string }, TaskWithDeployment | undefined>((asked) =>
    reads.findManyInWorkspaces(this.db, asked, true),
  );

  // The submission outbox (tasks/task-outbox.ts).

  /**
   * Saves a PENDING task unless its deployment already has maxPending tasks waiting; undefined
   * then. The bound and the insert in one statement, shared with the submits that arrive while
   * the one before is written (concurrent submits through several gateways may overshoot it by a few).
   */
  createPending(task: NewTask, maxPending: number): Promise<UnsentTask | undefined> {
    return this.pendingSaves.add({ task, maxPending });
  }

  /** Records where TASKS stored each task, once, in one statement; answers the ids marked now. */
  markEnqueuedMany(taskIds: string[], streamSeqs: number[]): Promise<Set<string>> {
    return outbox.markEnqueuedMany(this.db, taskIds, streamSeqs);
  }

  /**
   * Records where TASKS stored the task, once (a second send of the same task changes nothing);
   * marks arriving while the one before is written share one statement.
   */
  markEnqueued(taskId: string, streamSeq: number): Promise<boolean> {
    return this.enqueuedMarks.add({ taskId, streamSeq });
  }

  /** Pending tasks saved over olderThanSeconds ago and never published, oldest first. */
  listUnsent(olderThanSeconds: number, limit = 200): Promise<UnsentTask[]> {
    return outbox.listUnsent(this.db, olderThanSeconds, limit);
  }

  // The state machine's transitions on an agent's word (tasks/task-transitions.ts).

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

  /** An attempt failed and another follows: RETRY, from the holder of the attempt's lease. */
  markRetrying(claim: LeaseClaim, error: string): Promise<SettledAttempt | undefined> {
    return transitions.markRetrying(this.db, claim, error);
  }

  /** The last attempt failed: ERROR or TIMEOUT, from the holder of the attempt's lease. */
  markFailed(claim: LeaseClaim & { state: 'ERROR' | 'TIMEOUT'; error: string; failedAt: string }): Promise<SettledAttempt | undefined> {
    return transitions.markFailed(this.db, claim);
  }

  /** A delivery past the last attempt: the attempt before was lost; ERROR, from a machine placed for the task. */
  markLastAttemptLost(claim: LeaseClaim & { containerId: string; error: string; failedAt: string }): Promise<SettledAttempt | undefined> {
    return transitions.markLastAttemptLost(this.db, claim);
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

  /**
   * An attempt that ended before its start was reported: its start (believed as markStarted's,
   * from a container placed for the task, on an open task at an earlier attempt) and its result,
   * in one statement. Answers the task as it now is and the row as it was before, or undefined
   * when nothing changed. Those arriving while one statement is in flight share the next one.
   */
  startAndComplete(e: Completion & { startedAt: string }): Promise<StartedCompletion | undefined> {
    return this.startedCompletions.add(e);
  }

  /** The attempt the claimant settled already, when the task ended in one of `states` under its lease. */
  settledBy(claim: LeaseClaim, states: readonly TaskState[]): Promise<SettledAttempt | undefined> {
    return transitions.settledBy(this.db, claim, states);
  }

  /** The task's lease as it stands; undefined for an unknown task. */
  leaseOf(taskId: string): Promise<TaskLease | undefined> {
    return transitions.leaseOf(this.db, taskId);
  }

  // Endings by the user or by time (tasks/task-endings.ts).

  /** Cancels a task of the workspace not yet final; undefined when it was final already (or is not there). */
  cancel(taskId: string, workspaceId: string): Promise<CancelledTask | undefined> {
    return endings.cancel(this.db, taskId, workspaceId);
  }

  /** Every task of the deployment not yet final becomes CANCELLED with the reason. */
  cancelAllOf(deploymentId: string, reason: string): Promise<EndedTask[]> {
    return endings.cancelAllOf(this.db, deploymentId, reason);
  }

  /** Pending tasks past their ttl become EXPIRED, oldest first. */
  expirePastTtl(limit = 500): Promise<EndedTask[]> {
    return endings.expirePastTtl(this.db, limit);
  }

  // Reads (tasks/task-reads.ts) and activity (tasks/task-activity.ts).

  /**
   * One task of the workspace, with its inline result when asked for. Reads asked for while one
   * is in flight (the waits of many callers) share the next statement.
   */
  findInWorkspace(taskId: string, workspaceId: string, withResult: boolean): Promise<TaskWithDeployment | undefined> {
    return (withResult ? this.readsWithResult : this.reads).add({ taskId, workspaceId });
  }

  /** Tasks of the workspace, newest first, at most `limit`. */
  listForWorkspace(workspaceId: string, filter: TaskListFilter, limit: number): Promise<TaskWithDeployment[]> {
    return reads.listForWorkspace(this.db, workspaceId, filter, limit);
  }

  /** The workspace's tasks by current state, and submitted and ended per step since `from`. */
  activity(workspaceId: string, deploymentName: string | undefined, from: Date, stepSeconds: number): Promise<TaskActivityRow[]> {
    return activity.activity(this.db, workspaceId, deploymentName, from, stepSeconds);
  }

  /** Percentiles of the run time of the tasks that ended since `from`; nulls when none did. */
  durationPercentiles(
    workspaceId: string,
    deploymentName: string | undefined,
    from: Date,
  ): Promise<{ p50: number | null; p95: number | null; p99: number | null }> {
    return activity.durationPercentiles(this.db, workspaceId, deploymentName, from);
  }

  // Spot checks of results (tasks/task-spot-checks.ts).

  /** Records a COMPLETE task's spot check once; answers its input, or undefined when it had one. */
  beginSpotCheck(taskId: string, check: TaskSpotCheckRecord): Promise<{ payload: Record<string, unknown> } | undefined> {
    return spotChecks.beginSpotCheck(this.db, taskId, check);
  }

  /** Settles a pending spot check, from the verifier it names only. */
  settleSpotCheck(
    taskId: string,
    verifier: { machineId: string; containerId: string },
    change: Pick<TaskSpotCheckRecord, 'state' | 'verifierSha256' | 'reason' | 'checkedAt'>,
  ): Promise<spotChecks.SpotCheckOfTask | undefined> {
    return spotChecks.settleSpotCheck(this.db, taskId, verifier, change);
  }

  spotCheckOf(taskId: string): Promise<spotChecks.SpotCheckOfTask | undefined> {
    return spotChecks.spotCheckOf(this.db, taskId);
  }

  /** The oldest checks still waiting on their verifiers (the spot-check sweeper's candidates). */
  pendingSpotChecks(limit: number): Promise<spotChecks.PendingSpotCheck[]> {
    return spotChecks.pendingSpotChecks(this.db, limit);
  }

  // Callbacks (tasks/task-callbacks.ts).

  /** Claims up to `limit` due callbacks and holds them while `work` delivers them, its outcomes in the same transaction. */
  claimCallbacksDue(limit: number, work: (claim: CallbackClaim) => Promise<void>): Promise<void> {
    return callbacks.claimCallbacksDue(this.db, limit, work);
  }
}
