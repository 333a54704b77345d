import { Controller, Inject } from '@nestjs/common';
import { Counter } from 'prom-client';
import { Ctx, Payload } from '@nestjs/microservices';
import {
  TASK_COMPLETED,
  TASK_COMPLETED_MANY,
  TASK_FAILED,
  TASK_SPOT_CHECKED,
  TASK_STARTED,
  TaskCompleted,
  TaskCompletedMany,
  TaskFailed,
  TaskSpotChecked,
  TaskStarted,
} from '#tern/contracts';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { JetStreamContext, OnMessage } from '#tern/messaging';
import { ORDINARY_REFUSALS } from '#tern/tasks';
import { backoffMs, type BackoffShape } from '#tern/timing';
import { SpotChecks } from './spot-checks.js';
import { TaskTransitions, type TaskVerdict } from './task-transitions.js';

const refused = new Counter({
  name: 'tern_task_events_refused_total',
  help: 'Task events from machines not believed, dropped: a start from a container not placed for the task, an outcome from a machine not holding the lease of its attempt, by reason.',
  labelNames: ['reason'],
});

/**
 * How soon an outcome that overtook its start is asked again. The start of a task that finished
 * at once is usually milliseconds behind (two consumers read side by side), so the first wait is
 * short: a first wait of 500 ms added half a second to most tasks in bench/tasks. A long backlog
 * of starts after a restart still gets waits that grow to 5 s.
 */
export const NOT_YET_LEASED_BACKOFF: BackoffShape = { firstMs: 5, maxMs: 5000 };

/**
 * The agents' task events into the tasks table, one durable consumer per subject (shared by
 * gateway replicas; a restarted gateway resumes where it stopped, so no outcome is lost). An
 * event from a machine that does not hold the task is terminated with its reason.
 */
@Controller()
export class TaskEventsController {
  constructor(
    private readonly transitions: TaskTransitions,
    private readonly spotChecks: SpotChecks,
    @Inject(TERN_CONFIG) private readonly config: TernConfig,
  ) {}

  @OnMessage(TASK_STARTED, { concurrency: 64 })
  async started(@Payload() e: TaskStarted, @Ctx() ctx: JetStreamContext) {
    this.settle(await this.transitions.started(e, ctx.delivery!.storedAt), ctx);
  }

  @OnMessage(TASK_COMPLETED, { concurrency: 64 })
  async completed(@Payload() e: TaskCompleted, @Ctx() ctx: JetStreamContext) {
    this.settle(await this.transitions.completed(e, ctx.delivery!.storedAt), ctx);
  }

  /**
   * Completions an agent sent together: each judged as a lone task.completed is (its statement
   * shared with the others by the repository's group commit), the message acknowledged once all
   * are settled. A member naming another machine than the one that sent the message is refused.
   * Asked again while a member's start may still be on its way: the members accepted already
   * are repeats then, which change nothing.
   */
  @OnMessage(TASK_COMPLETED_MANY, { concurrency: 16 })
  async completedMany(@Payload() e: TaskCompletedMany, @Ctx() ctx: JetStreamContext) {
    const storedAt = ctx.delivery!.storedAt;
    const verdicts = await Promise.all(
      e.completions.map((c) =>
        c.machineId === e.machineId
          ? this.transitions.completed(c, storedAt)
          : ({
              accepted: false,
              why: 'not-lease-holder',
              detail: `${TASK_COMPLETED_MANY.subject} from machine ${e.machineId}: a member names machine ${c.machineId}`,
            } as const),
      ),
    );
    this.settleAll(verdicts, ctx);
  }

  @OnMessage(TASK_FAILED, { concurrency: 64 })
  async failed(@Payload() e: TaskFailed, @Ctx() ctx: JetStreamContext) {
    this.settle(await this.transitions.failed(e, ctx.delivery!.storedAt), ctx);
  }

  /** A verifier's answer to a spot check: believed only from the machine and container asked. */
  @OnMessage(TASK_SPOT_CHECKED, { concurrency: 16 })
  async spotChecked(@Payload() e: TaskSpotChecked, @Ctx() ctx: JetStreamContext) {
    const answer = await this.spotChecks.answered(e);
    if (answer.accepted) return;
    refused.inc({ reason: 'not-asked' });
    ctx.delivery!.reject(`not believed (not-asked): ${answer.detail}`);
  }

  /**
   * Accepted, a repeat or a lost attempt's late word: acknowledged. Not yet leased: asked again
   * after NOT_YET_LEASED_BACKOFF (an outcome may overtake its start; after a restart the starts of
   * a long backlog take a while) until TASK_LEASE_WAIT_SECONDS after it reached NATS. Else terminated
   * (logged) and counted.
   */
  private settle(verdict: TaskVerdict, ctx: JetStreamContext) {
    this.settleAll([verdict], ctx);
  }

  /** As settle, for a message telling several outcomes: asked again if any may yet be leased, else each refusal counted. */
  private settleAll(verdicts: TaskVerdict[], ctx: JetStreamContext) {
    const delivery = ctx.delivery!;
    const refusals = verdicts.flatMap((v) => (v.accepted || ORDINARY_REFUSALS.has(v.why) ? [] : [v]));
    if (!refusals.length) return;
    const waited = Date.now() - delivery.storedAt.getTime();
    if (refusals.some((v) => v.why === 'not-yet-leased') && waited < this.config.tasks.leaseWaitSeconds * 1000)
      return delivery.retryLater(backoffMs(delivery.deliveryCount, NOT_YET_LEASED_BACKOFF));
    for (const v of refusals) refused.inc({ reason: v.why });
    delivery.reject(refusals.map((v) => `not believed (${v.why}): ${v.detail}`).join('; '));
  }
}
