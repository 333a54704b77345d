import { setImmediate as nextTurn } from 'node:timers/promises';
import { Injectable, Logger } from '@nestjs/common';
import {
  type Contract,
  TASK_COMPLETED,
  TASK_FAILED,
  TASK_STARTED,
  taskResultName,
  TASK_RESULT_INLINE_BYTES,
  type TaskAttemptEnded,
  type TaskCompleted,
  type TaskFailed,
  type TaskStarted,
  type TaskState,
} from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import { boundAttempt } from '#tern/metering';
import {
  type CancelledTask,
  type EndedTask,
  type SettledAttempt,
  type StartedOver,
  TasksRepository,
  type TaskWithDeployment,
} from '#tern/persistence';
import {
  finalStateAfter,
  type LeaseClaim,
  type LeaseRefusal,
  lostBeforeStart,
  refusedForPlacement,
  TASK_START_REPORT_DELAY_MS,
  whyRefused,
} from '#tern/tasks';
import { fireAndForget } from '#tern/timing';
import { AttemptFacts } from './attempt-facts.js';
import { SpotChecks } from './spot-checks.js';
import { TaskWaiters } from './task-waiters.js';

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
  /**
   * Starts being recorded now, by task and attempt. A task that finishes at once has its outcome
   * read beside its start (one consumer each): the outcome waits here for the start instead of
   * finding no lease and being asked again later through JetStream.
   */
  private readonly starting = new Map<string, Promise<unknown>>();

  constructor(
    private readonly tasks: TasksRepository,
    private readonly messaging: Messaging,
    private readonly waiters: TaskWaiters,
    private readonly spotChecks: SpotChecks,
    private readonly facts: AttemptFacts,
  ) {}

  /**
   * Records an attempt's start and lease, when its container was placed on its machine for the
   * task's version. The start recorded is `observedAt`, when the event reached NATS, not the
   * agent's startedAt: the attempt's time runs from what the control plane saw.
   */
  async started(e: TaskStarted, observedAt: Date): Promise<TaskVerdict> {
    const key = `${e.taskId}:${e.attempt}`;
    const marking = this.tasks.markStarted({ ...e, startedAt: observedAt.toISOString() });
    this.starting.set(key, marking);
    const before = await marking.finally(() => {
      if (this.starting.get(key) === marking) this.starting.delete(key);
    });
    if (!before) return this.startRefused(TASK_STARTED, e);
    await this.lostBefore(e, before, e.startedAt, observedAt);
    return ACCEPTED;
  }

  /**
   * The previous attempt was still running when attempt `e.attempt` began: its agent never
   * reported, so it was lost with its container or machine. Said once, naming that machine
   * (reputation counts it there); the agent's own report of it, if it came after all, has the same id.
   */
  private async lostBefore(e: TaskStarted | TaskCompleted, before: StartedOver, startedAt: string, observedAt: Date): Promise<void> {
    if (!lostBeforeStart(before, e.attempt)) return;
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
          failedAt: startedAt,
        },
        { msgId: `${e.taskId}:failed:${before.wasAttempt}` },
      )
      .catch((err: Error) => this.logger.warn({ taskId: e.taskId, err: err.message }, 'could not report a lost attempt'));
    // Nothing the lost attempt ran is on record: no duration.
    await this.attemptEnded(
      { taskId: e.taskId, attempt: before.wasAttempt, machineId: before.wasMachine, outcome: 'failed', cause: 'container-lost' },
      { ...before, machineId: before.wasMachine, containerId: before.wasContainer, startedAt: null },
      observedAt,
    );
  }

  /** An attempt's failure, believed from the holder of its lease (or, for a last attempt lost, from a machine placed to be handed it). */
  async failed(e: TaskFailed, observedAt: Date): Promise<TaskVerdict> {
    await this.startOf(e);
    const error = e.cause === 'error' ? e.error : `${e.cause}: ${e.error}`;
    const outcome = { taskId: e.taskId, attempt: e.attempt, machineId: e.machineId, outcome: 'failed' as const, cause: e.cause };
    const claim = { claimedEndedAt: Date.parse(e.failedAt), claimedDurationMs: e.durationMs };
    if (e.willRetry) {
      const settled = await this.tasks.markRetrying(e, error);
      if (settled) await this.attemptEnded(outcome, settled, observedAt, claim);
      return this.verdict(TASK_FAILED, e, Boolean(settled));
    }
    const state = finalStateAfter(e.cause);
    let settled = await this.tasks.markFailed({ ...e, state, error });
    // Handed the task past its last attempt, this machine says the attempt before was lost: the
    // holder of that attempt's lease lost it, and nothing it ran is on record.
    if (settled) await this.attemptEnded(outcome, settled, observedAt, claim);
    else if (await this.tellAgain(e, [state], (repeat) => this.attemptEnded(outcome, repeat, observedAt, claim))) return ACCEPTED;
    else if (e.cause === 'container-lost' && e.containerId) {
      settled = await this.tasks.markLastAttemptLost({ ...e, containerId: e.containerId, error });
      if (settled?.machineId)
        await this.attemptEnded({ ...outcome, machineId: settled.machineId }, { ...settled, startedAt: null }, observedAt);
    }
    if (settled) this.announce(e.taskId, settled.workspaceId, state, e.failedAt);
    return this.verdict(TASK_FAILED, e, Boolean(settled));
  }

  /** The result of an attempt, believed from the holder of its lease only: one completion per task. */
  async completed(e: TaskCompleted, observedAt: Date): Promise<TaskVerdict> {
    // A result object is the attempt's own: pointing at another (another tenant's) is refused.
    if (e.resultRef && e.resultRef !== taskResultName(e.taskId, e.attempt))
      return this.refuse(TASK_COMPLETED, e, {
        why: 'foreign-result',
        detail: `resultRef ${JSON.stringify(e.resultRef)} is not the result of attempt ${e.attempt} of task ${e.taskId}`,
      });
    const inline = e.resultRef ? null : e.result === undefined ? null : JSON.stringify(e.result);
    if (inline && Buffer.byteLength(inline) > TASK_RESULT_INLINE_BYTES)
      this.logger.warn({ taskId: e.taskId }, 'a large result arrived inline');
    const completion = {
      taskId: e.taskId,
      resultJson: inline,
      resultRef: e.resultRef ?? null,
      attempt: e.attempt,
      completedAt: e.completedAt,
      containerId: e.containerId,
      machineId: e.machineId,
    };
    let settled: TaskWithDeployment | undefined;
    let startedOver: { before: StartedOver; startedAt: string } | undefined;
    if (e.withStart) {
      // No start was reported: one is recorded now, no earlier than the agent could have held it back.
      const startedAt = new Date(observedAt.getTime() - Math.min(e.durationMs, TASK_START_REPORT_DELAY_MS)).toISOString();
      const both = await this.tasks.startAndComplete({ ...completion, startedAt });
      settled = both?.task;
      if (both) startedOver = { before: both.before, startedAt };
    } else {
      await this.startOf(e);
      settled = await this.tasks.complete(completion);
    }
    const ended = { taskId: e.taskId, attempt: e.attempt, machineId: e.machineId, outcome: 'completed' as const };
    const claim = { claimedEndedAt: Date.parse(e.completedAt), claimedDurationMs: e.durationMs };
    if (settled) {
      // The caller hears first: the fact for metering follows, and should this gateway die in
      // between, the event is delivered again and the fact told then (tellAgain). A waiter's
      // answer is written within this turn's microtasks; the facts wait for the next turn, so
      // that their writes to NATS (which wake the other services, who on a small machine take
      // the core) come after the caller's answer, not before it.
      this.waiters.wake(e.taskId, settled);
      await nextTurn();
      this.announce(e.taskId, settled.workspaceId, 'COMPLETE', e.completedAt);
      await this.attemptEnded(ended, settled, observedAt, claim);
      // After the result is kept and told: a spot check never holds up, nor changes, the task's own outcome.
      fireAndForget(`spot check of task ${e.taskId}`, this.logger, this.spotChecks.consider(settled, e.attempt, e.machineId, inline));
      if (startedOver) await this.lostBefore(e, startedOver.before, startedOver.startedAt, observedAt);
    } else await this.tellAgain(e, ['COMPLETE'], (repeat) => this.attemptEnded(ended, repeat, observedAt, claim));
    return e.withStart && !settled ? this.startRefused(TASK_COMPLETED, e) : this.verdict(TASK_COMPLETED, e, Boolean(settled));
  }

  /**
   * Tells metering and reputation an attempt's outcome the lease vouches for: who and what from
   * the tasks table, times bounded by what the control plane observed (boundAttempt). Stored
   * before the agent's event is acknowledged, so a crash in between sends it again (AttemptFacts).
   */
  private async attemptEnded(
    outcome: Pick<TaskAttemptEnded, 'taskId' | 'attempt' | 'machineId' | 'outcome' | 'cause'>,
    settled: SettledAttempt,
    observedAt: Date,
    claim: { claimedEndedAt: number; claimedDurationMs?: number } = { claimedEndedAt: observedAt.getTime() },
  ): Promise<void> {
    const startedAt = settled.startedAt ? settled.startedAt.getTime() : null;
    const bound = boundAttempt({ startedAt, observedAt: observedAt.getTime(), ...claim });
    const { cause, ...rest } = outcome;
    const fact: TaskAttemptEnded = {
      ...rest,
      ...(cause ? { cause } : {}),
      workspaceId: settled.workspaceId,
      deploymentId: settled.deploymentId,
      ...(settled.containerId ? { containerId: settled.containerId } : {}),
      ...(startedAt !== null ? { startedAt: new Date(startedAt).toISOString() } : {}),
      endedAt: new Date(bound.endedAt).toISOString(),
      ...(bound.durationMs !== undefined ? { durationMs: bound.durationMs } : {}),
    };
    await this.facts.tell(fact);
  }

  /**
   * A lease holder's outcome seen again after the task ended as it said: the gateway may have
   * died between recording it and telling metering, so the fact is told again (same observedAt,
   * the event's own arrival, and the same msg id: JetStream keeps one). Answers whether it was one.
   */
  private async tellAgain(claim: LeaseClaim, states: TaskState[], tell: (repeat: SettledAttempt) => Promise<void>): Promise<boolean> {
    const repeat = await this.tasks.settledBy(claim, states);
    if (repeat) await tell(repeat);
    return Boolean(repeat);
  }

  private async verdict(contract: Contract, claim: LeaseClaim, changed: boolean): Promise<TaskVerdict> {
    return changed ? ACCEPTED : this.refuse(contract, claim, whyRefused(await this.tasks.leaseOf(claim.taskId), claim));
  }

  /** Why a start (or a completion standing for one) changed nothing, judged against the lease as it stands now. */
  private async startRefused(contract: Contract, e: TaskStarted | TaskCompleted): Promise<TaskVerdict> {
    const lease = await this.tasks.leaseOf(e.taskId);
    if (refusedForPlacement(lease, e.attempt))
      return this.refuse(contract, e, {
        why: 'no-placement',
        detail: `container ${e.containerId} was not placed on machine ${e.machineId} for the version of task ${e.taskId}`,
      });
    return this.refuse(contract, e, whyRefused(lease, e));
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
    if (cancelled) this.announce(taskId, cancelled.workspaceId, 'CANCELLED', cancelled.endedAt.toISOString());
    return cancelled;
  }

  /** Every task of a deleted task queue not yet ended becomes CANCELLED; returns how many. */
  async cancelAllOf(deploymentId: string, reason: string): Promise<number> {
    const cancelled = await this.tasks.cancelAllOf(deploymentId, reason);
    for (const t of cancelled) this.announce(t.id, t.workspaceId, 'CANCELLED', t.endedAt.toISOString());
    return cancelled.length;
  }

  /** Pending tasks past their ttl become EXPIRED; returns where their messages sit. */
  async expire(limit = 500): Promise<EndedTask[]> {
    const expired = await this.tasks.expirePastTtl(limit);
    for (const t of expired) this.announce(t.id, t.workspaceId, 'EXPIRED', t.endedAt.toISOString());
    return expired;
  }

  /** Waits for the start of the outcome's attempt when this replica is recording it now. */
  private async startOf(claim: LeaseClaim): Promise<void> {
    await this.starting.get(`${claim.taskId}:${claim.attempt}`)?.catch(() => undefined);
  }

  /** Tells every gateway replica's waiters and the workspace's integrators (TaskWaiters.announce). */
  announce(taskId: string, workspaceId: string, state: TaskState, endedAt: string) {
    this.waiters.announce({ taskId, workspaceId, state, endedAt });
  }
}
