import { Injectable, Logger } from '@nestjs/common';
import {
  type Contract,
  TASK_COMPLETED,
  TASK_ENDED,
  TASK_FAILED,
  TASK_STARTED,
  taskResultName,
  TASK_RESULT_INLINE_BYTES,
  type TaskCompleted,
  type TaskFailed,
  type TaskStarted,
  type TaskState,
} from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import { type CancelledTask, type EndedTask, type LeaseClaim, TasksRepository } from '#tern/persistence';
import { type LeaseRefusal, whyRefused } from './task-leases.js';
import { isFinal } from './task-views.js';

/** Whether a task event changed the task, and if not why. */
export type TaskVerdict = { accepted: true } | { accepted: false; why: LeaseRefusal; detail: string };
const ACCEPTED: TaskVerdict = { accepted: true };

/**
 * The task state machine in Postgres, fed by the agents' task events. Events may arrive twice
 * (at-least-once) and out of order (one consumer per subject), so every transition is one
 * conditional update (TasksRepository): a final state is never left, one completion wins
 * (exactly one result per task), and an attempt's event never overwrites a later attempt's.
 * No machine's word is taken for a task it does not hold: a start counts only from a container
 * the scheduler placed on that machine for the task's version, and records the attempt's lease
 * (attempt, machine, container); an outcome counts only from that lease's holder.
 */
@Injectable()
export class TaskTransitions {
  private readonly logger = new Logger('task-transitions');

  constructor(
    private readonly tasks: TasksRepository,
    private readonly messaging: Messaging,
  ) {}

  /** Records an attempt's start and lease, when its container was placed on its machine for the task's version. */
  async started(e: TaskStarted): Promise<TaskVerdict> {
    const before = await this.tasks.markStarted(e);
    if (!before) {
      const lease = await this.tasks.leaseOf(e.taskId);
      if (lease && lease.attempts < e.attempt && !isFinal(lease.state))
        return this.refuse(TASK_STARTED, e, {
          why: 'no-placement',
          detail: `container ${e.containerId} was not placed on machine ${e.machineId} for the version of task ${e.taskId}`,
        });
      return this.refuse(TASK_STARTED, e, whyRefused(lease, e));
    }
    // The previous attempt was still running when this one began: its agent never reported, so
    // it was lost with its container or machine. Said once, naming that machine (reputation
    // counts it there); the agent's own report of it, if it came after all, has the same id.
    if (before.was === 'RUNNING' && before.wasAttempt === e.attempt - 1 && before.wasMachine) {
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
    return ACCEPTED;
  }

  /** An attempt's failure, believed from the holder of its lease (or, for a last attempt lost, from a machine placed to be handed it). */
  async failed(e: TaskFailed): Promise<TaskVerdict> {
    const error = e.cause === 'error' ? e.error : `${e.cause}: ${e.error}`;
    if (e.willRetry) return this.verdict(TASK_FAILED, e, await this.tasks.markRetrying(e, error));
    const state = e.cause === 'timeout' ? 'TIMEOUT' : 'ERROR';
    let changed = await this.tasks.markFailed({ ...e, state, error });
    // Handed the task past its last attempt, this machine says the attempt before was lost.
    if (!changed && e.cause === 'container-lost' && e.containerId)
      changed = await this.tasks.markLastAttemptLost({ ...e, containerId: e.containerId, error });
    if (changed) this.announce(e.taskId, state, e.failedAt);
    return this.verdict(TASK_FAILED, e, changed);
  }

  /** The result of an attempt, believed from the holder of its lease only: one completion per task. */
  async completed(e: TaskCompleted): Promise<TaskVerdict> {
    // A result object is the attempt's own: pointing at another (another tenant's) is refused.
    if (e.resultRef && e.resultRef !== taskResultName(e.taskId, e.attempt))
      return this.refuse(TASK_COMPLETED, e, {
        why: 'foreign-result',
        detail: `resultRef ${JSON.stringify(e.resultRef)} is not the result of attempt ${e.attempt} of task ${e.taskId}`,
      });
    const inline = e.resultRef ? null : e.result === undefined ? null : JSON.stringify(e.result);
    if (inline && Buffer.byteLength(inline) > TASK_RESULT_INLINE_BYTES)
      this.logger.warn({ taskId: e.taskId }, 'a large result arrived inline');
    const changed = await this.tasks.complete({
      taskId: e.taskId,
      resultJson: inline,
      resultRef: e.resultRef ?? null,
      attempt: e.attempt,
      completedAt: e.completedAt,
      containerId: e.containerId,
      machineId: e.machineId,
    });
    if (changed) this.announce(e.taskId, 'COMPLETE', e.completedAt);
    return this.verdict(TASK_COMPLETED, e, changed);
  }

  private async verdict(contract: Contract, claim: LeaseClaim, changed: boolean): Promise<TaskVerdict> {
    return changed ? ACCEPTED : this.refuse(contract, claim, whyRefused(await this.tasks.leaseOf(claim.taskId), claim));
  }

  private refuse(contract: Contract, claim: LeaseClaim, refusal: { why: LeaseRefusal; detail: string }): TaskVerdict {
    return { accepted: false, ...refusal, detail: `${contract.subject} from machine ${claim.machineId}: ${refusal.detail}` };
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

  /** Tells every gateway replica's waiters (core NATS; a lost one is caught by their re-read). */
  announce(taskId: string, state: TaskState, endedAt: string) {
    this.messaging.emit(TASK_ENDED, { taskId, state, endedAt });
  }
}
