import { Injectable, Logger } from '@nestjs/common';
import {
  TASK_ENDED,
  TASK_FAILED,
  TASK_RESULT_INLINE_BYTES,
  type TaskCompleted,
  type TaskFailed,
  type TaskStarted,
  type TaskState,
} from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import { type CancelledTask, type EndedTask, TasksRepository } from '#tern/persistence';

/**
 * The task state machine in Postgres, fed by the agents' task events. Events may arrive twice
 * (at-least-once) and out of order (one consumer per subject), so every transition is one
 * conditional update (TasksRepository): a final state is never left, the first completion wins
 * (exactly one result per task), and an attempt's event never overwrites a later attempt's.
 */
@Injectable()
export class TaskTransitions {
  private readonly logger = new Logger('task-transitions');

  constructor(
    private readonly tasks: TasksRepository,
    private readonly messaging: Messaging,
  ) {}

  async started(e: TaskStarted): Promise<boolean> {
    const before = await this.tasks.markStarted(e);
    // The previous attempt was still running when this one began: its agent never reported, so
    // it was lost with its container or machine. Said once, naming that machine (reputation
    // counts it there); the agent's own report of it, if it came after all, has the same id.
    if (before?.was === 'RUNNING' && before.wasAttempt === e.attempt - 1 && before.wasMachine) {
      await this.messaging
        .publish(
          TASK_FAILED,
          {
            taskId: e.taskId,
            deploymentId: e.deploymentId,
            ...(e.deploymentVersion ? { deploymentVersion: e.deploymentVersion } : {}),
            workspaceId: e.workspaceId,
            machineId: before.wasMachine,
            ...(before.wasContainer ? { containerId: before.wasContainer } : {}),
            attempt: before.wasAttempt,
            cause: 'container-lost',
            error: `attempt ${before.wasAttempt} never reported: its container or machine was lost; running it again`,
            willRetry: true,
            failedAt: e.startedAt,
          },
          { msgId: `${e.taskId}:failed:${before.wasAttempt}` },
        )
        .catch((err: Error) => this.logger.warn({ taskId: e.taskId, err: err.message }, 'could not report a lost attempt'));
    }
    return before !== undefined;
  }

  async failed(e: TaskFailed): Promise<boolean> {
    const error = e.cause === 'error' ? e.error : `${e.cause}: ${e.error}`;
    if (e.willRetry) return this.tasks.markRetrying(e.taskId, e.attempt, error);
    const state = e.cause === 'timeout' ? 'TIMEOUT' : 'ERROR';
    const changed = await this.tasks.markFailed({
      taskId: e.taskId,
      state,
      attempt: e.attempt,
      error,
      failedAt: e.failedAt,
      containerId: e.containerId,
      machineId: e.machineId,
    });
    return this.ended(changed, e.taskId, state, e.failedAt);
  }

  async completed(e: TaskCompleted): Promise<boolean> {
    const inline = e.resultRef ? null : e.result === undefined ? null : JSON.stringify(e.result);
    if (inline && Buffer.byteLength(inline) > TASK_RESULT_INLINE_BYTES)
      this.logger.warn({ taskId: e.taskId }, 'a large result arrived inline');
    const changed = await this.tasks.complete({
      taskId: e.taskId,
      resultJson: inline,
      resultRef: e.resultRef ?? null,
      attempt: e.attempt,
      completedAt: e.completedAt,
      // Its start from its duration: task.started may arrive after task.completed (one consumer per subject).
      startedAt: new Date(Date.parse(e.completedAt) - e.durationMs).toISOString(),
      containerId: e.containerId,
      machineId: e.machineId,
    });
    return this.ended(changed, e.taskId, 'COMPLETE', e.completedAt);
  }

  /**
   * Cancels a task not yet final. Returns the state it was in (RUNNING means an agent must stop
   * it) and where its message sits, or undefined when it was final already.
   */
  async cancel(taskId: string, workspaceId: string): Promise<CancelledTask | undefined> {
    const cancelled = await this.tasks.cancel(taskId, workspaceId);
    if (cancelled) this.announce(taskId, 'CANCELLED', cancelled.endedAt.toISOString());
    return cancelled;
  }

  /** Every task of a deleted task queue not yet ended becomes CANCELLED; returns how many. */
  async cancelAllOf(deploymentId: string, reason: string): Promise<number> {
    const cancelled = await this.tasks.cancelAllOf(deploymentId, reason);
    for (const t of cancelled) this.announce(t.id, 'CANCELLED', t.endedAt.toISOString());
    return cancelled.length;
  }

  /** Pending tasks past their ttl become EXPIRED; returns where their messages sit. */
  async expire(limit = 500): Promise<EndedTask[]> {
    const expired = await this.tasks.expirePastTtl(limit);
    for (const t of expired) this.announce(t.id, 'EXPIRED', t.endedAt.toISOString());
    return expired;
  }

  private ended(changed: boolean, taskId: string, state: TaskState, at: string): boolean {
    if (changed) this.announce(taskId, state, at);
    return changed;
  }

  /** Tells every gateway replica's waiters (core NATS; a lost one is caught by their re-read). */
  private announce(taskId: string, state: TaskState, endedAt: string) {
    this.messaging.emit(TASK_ENDED, { taskId, state, endedAt });
  }
}
