import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import type { Consumer, JsMsg } from '@nats-io/jetstream';
import type { Subscription } from '@nats-io/transport-node';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import {
  type Contract,
  AGENT_TASK_CANCEL,
  TASK_COMPLETED,
  TASK_COMPLETED_MANY,
  TASK_COMPLETED_MANY_MAX,
  TASK_FAILED,
  TASK_RESULT_INLINE_BYTES,
  TASK_STARTED,
  type TaskCompleted,
  type TaskFailureCause,
  type TaskFailed,
  TaskItem,
} from '#tern/contracts';
import { inboxPrefix } from '#tern/nats-auth';
import { decode, Messaging, PULL_EXPIRES_MS } from '#tern/messaging';
import {
  afterFailure,
  BATCHED_RESULT_MAX_BYTES,
  batchMsgId,
  compileRetryPolicy,
  isPastLastAttempt,
  TASK_PROGRESS_EVERY_MS,
  TASK_START_REPORT_DELAY_MS,
  type TaskRetryPolicy,
} from '#tern/tasks';
import { waitForHealth } from '#tern/runtime';
import { backoffMs, fireAndForget, GroupCommit, sleep } from '#tern/timing';
import { AGENT_CONTEXT, type AgentContext } from '../agent-context.js';
import type { ContainerRecord } from '../containers/container-spec.js';
import { callHandler, failedForGood, failureOf, type HandlerOutcome } from './call-handler.js';
import { BunchCall, bunchSize, ChunkDurations, pullMore } from './bunch-call.js';
import { bunchable, type Bunches, isMapChunk } from './bunches.js';
import type { ContainerEndpoint } from '../invoke/forward.js';
import { TaskPermits } from './task-permits.js';
import { TaskLoads } from './task-loads.js';
import { putResult } from './large-results.js';

/** Task ids cancelled lately, so a cancel that overtakes its own delivery still wins. */
const REMEMBER_CANCELLED = 10_000;
/** After a bunch ended early, how long its chunks not yet run wait for the runner to answer /health again. */
const RUNNER_BACK_WAIT_MS = 10_000;
/** Between tries of a task event: 0.5 s, 1 s, 2 s, 4 s (the fifth failure gives up). */
const PUBLISH_RETRY_BACKOFF = { firstMs: 500, maxMs: 4000 };

interface Served {
  readonly record: ContainerRecord;
  readonly endpoint: ContainerEndpoint;
  /** No new pulls: the container is stopping (or gone). */
  stopped: boolean;
  /** The container is gone: what a pull still brings goes back to the stream. */
  gone: boolean;
  /** Its slots waiting in a pull or pulling a bunch now (bunchSize's `pulling`). */
  pulling: number;
  /** Which tasks its runner said it takes in bunches (bunch-call.ts); until it says, one task per call. */
  bunches: Bunches;
  readonly loops: Promise<void>[];
  /** Once stopped: settles when its pulls and their tasks have ended (it then leaves `served`). */
  drained?: Promise<void>;
}

interface Running {
  readonly containerId: string;
  readonly abort: AbortController;
  why?: 'cancelled' | 'timeout';
}

/** One delivery of a task being run: what every report of it carries. */
interface Attempt {
  readonly task: TaskItem;
  readonly attempt: number;
  readonly retries: TaskRetryPolicy;
  readonly msg: JsMsg;
  readonly base: Pick<TaskFailed, 'taskId' | 'deploymentId' | 'deploymentVersion' | 'workspaceId'>;
  readonly where: { containerId: string; machineId: string };
}

/**
 * The dispatcher: runs tasks in this machine's task-queue containers: for each ready container, one pull loop
 * per slot (workers × concurrency) on its version's durable consumer, through that version's task
 * permit (task-permits.ts: the only NATS user of this machine that may pull it), so the machine never holds
 * more tasks than it can run. Each task: task.started, POST / to the handler with progress
 * signals to JetStream while it runs, then task.completed (ack) or task.failed: nak with the
 * delay the task's retry policy gives (libs/tasks/src/retry-policy.ts), ack after the last
 * attempt. A cancel or a timeout closes the handler's connection, which makes the runner end that worker.
 */
@Injectable()
export class TaskDispatcher implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('tasks');
  /** Containers pulling tasks, and those told to stop whose last pulls have not ended yet. */
  private readonly served = new Map<string, Served>();
  private readonly running = new Map<string, Running>();
  private readonly cancelled = new Set<string>();
  private readonly chunkDurations = new ChunkDurations();
  private readonly loads: TaskLoads;
  private readonly permits: TaskPermits;
  private subscription?: Subscription;
  /**
   * Completions with small results: those that end while one is being published go together in
   * the next message (task.completed-many; a lone one as task.completed), so a bunch of map chunks,
   * or tasks of several slots ending at once, cost the gateway one delivery and ack. None waits for
   * others: the first goes at once.
   */
  private readonly completions = new GroupCommit<TaskCompleted, void>((batch) => this.reportCompletions(batch), {
    maxBatch: TASK_COMPLETED_MANY_MAX,
  });

  constructor(
    private readonly messaging: Messaging,
    @Inject(AGENT_CONTEXT) private readonly ctx: AgentContext,
    @Inject(TERN_CONFIG) config: TernConfig,
  ) {
    const { machineId } = ctx.registration;
    this.loads = new TaskLoads(messaging, machineId);
    this.permits = new TaskPermits({
      connect: { ...config.nats, inboxPrefix: inboxPrefix(config.nats.namespace, 'agent', machineId) },
      machineId,
      gateway: () => ctx.settings,
      creds: ctx.natsCreds,
      messaging,
      logger: this.logger,
    });
  }

  private get machineId(): string {
    return this.ctx.registration.machineId;
  }

  onApplicationBootstrap() {
    this.subscription = this.messaging.listen(AGENT_TASK_CANCEL, (cancel) => this.onCancelled(cancel.taskId), [this.machineId]);
    this.loads.start();
  }

  async onApplicationShutdown() {
    this.subscription?.unsubscribe();
    await this.loads.stop();
    for (const id of [...this.served.keys()]) fireAndForget('dropping its task pulls', this.logger, this.drop(id));
    this.permits.closeAll();
  }

  /** Starts pulling tasks for a ready task-queue container. */
  serve(record: ContainerRecord, endpoint: ContainerEndpoint): void {
    if (this.served.has(record.containerId)) return;
    const served: Served = { record, endpoint, stopped: false, gone: false, bunches: 'none', pulling: 0, loops: [] };
    this.served.set(record.containerId, served);
    this.loads.track(record);
    this.permits.retain(record.deploymentId, record.deploymentVersion);
    const slots = Math.max(1, record.workers * record.concurrency);
    // The scheduler declared the version's consumer before it sent the start command.
    for (let i = 0; i < slots; i++) served.loops.push(this.pullLoop(served));
    this.logger.log({ containerId: record.containerId, slots }, `pulling tasks for ${record.containerId} (${slots} at a time)`);
  }

  /** Where a container this machine serves tasks for answers; undefined when it serves none by that id. */
  endpointOf(containerId: string): { endpoint: ContainerEndpoint; deploymentId: string; deploymentVersion: number } | undefined {
    const served = this.served.get(containerId);
    if (!served || served.stopped) return undefined;
    return { endpoint: served.endpoint, deploymentId: served.record.deploymentId, deploymentVersion: served.record.deploymentVersion };
  }

  /**
   * Stops pulling for a container that is stopping (`alive`) or gone; resolves once its pulls
   * and the tasks they brought have ended. A pull still waiting when a container is told to stop
   * may yet bring a task: a container still alive runs it (its stop waits for this), since a task
   * handed back to the stream would spend one of its attempts without running.
   */
  drop(containerId: string, alive = false): Promise<void> {
    const served = this.served.get(containerId);
    if (!served) return Promise.resolve();
    served.gone ||= !alive;
    if (served.drained) return served.drained;
    served.stopped = true;
    this.loads.untrack(containerId);
    // The permit stays open until the container's tasks have settled (their acks go through it).
    const { deploymentId, deploymentVersion } = served.record;
    served.drained = Promise.allSettled(served.loops).then(() => {
      this.served.delete(containerId);
      this.permits.release(deploymentId, deploymentVersion);
    });
    fireAndForget('closing a task permit', this.logger, served.drained);
    return served.drained;
  }

  private onCancelled(taskId: string) {
    this.cancelled.add(taskId);
    if (this.cancelled.size > REMEMBER_CANCELLED) this.cancelled.delete(this.cancelled.values().next().value!);
    const run = this.running.get(taskId);
    if (run) {
      run.why = 'cancelled';
      run.abort.abort();
      this.logger.log({ taskId, containerId: run.containerId }, `stopping cancelled task ${taskId}`);
    }
  }

  private async pullLoop(served: Served): Promise<void> {
    const { record } = served;
    while (!served.stopped) {
      try {
        const consumer = await this.permits.consumer(record.deploymentId, record.deploymentVersion);
        while (!served.stopped) {
          served.pulling++;
          const msg = await consumer.next({ expires: PULL_EXPIRES_MS }).finally(() => served.pulling--);
          if (!msg) continue;
          // Gone while pulling: hand it straight back (a container that is only stopping runs it; see drop).
          if (served.gone) msg.nak();
          else await this.take(served, consumer, msg);
        }
      } catch (e) {
        if (served.stopped) return;
        this.logger.warn(
          { containerId: record.containerId },
          `task pull for ${record.containerId} interrupted (${(e as Error).message}); again in 1 s`,
        );
        await sleep(1000);
      }
    }
  }

  /**
   * Runs a pulled task; when the runner takes it in bunches (a map chunk, or a plain task where
   * the runner takes those too) and such tasks are short, with up to bunchSize - 1 more pulled at
   * once and run in one call (runBunch). Every message pulled is held (`working`) until its own
   * attempt begins.
   */
  private async take(served: Served, consumer: Consumer, msg: JsMsg): Promise<void> {
    const first = await this.prepare(served, msg);
    if (!first) return;
    const { record } = served;
    const size = bunchable(served.bunches, first.task)
      ? bunchSize(
          this.chunkDurations.mean(first.task, this.loads.meanDurationMs(record.deploymentId, record.deploymentVersion)),
          msg.info.pending,
          { pulling: served.pulling, running: served.loops.length - 1 - served.pulling },
        )
      : 1;
    if (size <= 1) return this.runAttempt(served, first, this.callAlone(served, first));
    const bunch = [first];
    const alone: Attempt[] = [];
    served.pulling++;
    const pulled = await pullMore(consumer, size - 1, this.logger).finally(() => served.pulling--);
    for (const more of pulled) {
      if (served.gone) more.nak();
      else {
        const a = await this.prepare(served, more);
        if (a) (bunchable(served.bunches, a.task) ? bunch : alone).push(a);
      }
    }
    const held = new Set([...bunch, ...alone]);
    const progress = setInterval(() => held.forEach((a) => a.msg.working()), TASK_PROGRESS_EVERY_MS);
    try {
      const unstarted = bunch.length > 1 ? await this.runBunch(served, bunch, held) : bunch;
      // The bunch ended early (a hang-up, a worker that died): its worker is being replaced; a call
      // before the runner answers again would fail a chunk that never ran.
      if (unstarted.length && unstarted !== bunch && !served.gone)
        await waitForHealth({ ...served.endpoint, timeoutMs: RUNNER_BACK_WAIT_MS }).catch(() => undefined);
      for (const a of [...unstarted, ...alone]) {
        held.delete(a);
        if (served.gone) a.msg.nak();
        else await this.runAttempt(served, a, this.callAlone(served, a));
      }
    } finally {
      clearInterval(progress);
    }
  }

  /**
   * Runs tasks in one call of the runner, each its own attempt (its timeout from its turn, its
   * report, ack or nak); answers those whose turn never came (a hang-up, a worker that died),
   * still held, to be run one per call. A member's timeout hangs up (the runner ends the worker),
   * and so does a plain task's cancel, which stops it as it would stop it alone; a map chunk's
   * cancel only drops its outcome (a map's cancel cancels all its chunks: hanging up for each
   * would end a worker per chunk).
   */
  private async runBunch(served: Served, bunch: Attempt[], held: Set<Attempt>): Promise<Attempt[]> {
    const call = new BunchCall(
      served.endpoint,
      bunch.map((a) => ({ taskId: a.task.taskId, attempt: a.attempt, payload: a.task.payload })),
    );
    const runs: Promise<void>[] = [];
    for (const [i, a] of bunch.entries()) {
      if (!(await call.turn(i))) {
        await Promise.all(runs);
        return bunch.slice(i);
      }
      held.delete(a);
      runs.push(
        this.runAttempt(served, a, async (run) => {
          const onAbort = () => (run.why === 'timeout' || !isMapChunk(a.task)) && call.hangUp(i);
          // Cancelled before its turn came: it has begun in the runner, and is stopped as it begins.
          if (run.abort.signal.aborted) onAbort();
          else run.abort.signal.addEventListener('abort', onAbort, { once: true });
          const outcome = await call.outcome(i);
          run.abort.signal.removeEventListener('abort', onAbort);
          return run.abort.signal.aborted ? { kind: 'aborted' } : outcome;
        }),
      );
    }
    await Promise.all(runs);
    return [];
  }

  /** A task alone in its call; the runner's answer says whether it takes bunches. */
  private callAlone(served: Served, { task, attempt }: Attempt): (run: Running) => Promise<HandlerOutcome> {
    return (run) =>
      callHandler(served.endpoint, task.taskId, attempt, task.payload, run.abort.signal, (bunches) => (served.bunches = bunches));
  }

  /** The attempt a pulled message is, or undefined when it was settled here already (invalid, cancelled, expired, past its last attempt). */
  private async prepare(served: Served, msg: JsMsg): Promise<Attempt | undefined> {
    const decoded = await decode(TaskItem, msg.data);
    if (!decoded.ok) {
      this.logger.warn({ seq: msg.seq, reason: decoded.reason }, 'dropped an invalid task message');
      msg.term();
      return undefined;
    }
    const task = decoded.value;
    const attempt = msg.info.deliveryCount;
    const retries = compileRetryPolicy(task);
    if (this.cancelled.has(task.taskId)) return void msg.ack();
    if (attempt === 1 && task.expiresAt && Date.parse(task.expiresAt) < Date.now()) return void msg.ack(); // the gateway marks it EXPIRED
    const attemptOf: Attempt = {
      task,
      attempt,
      retries,
      msg,
      base: {
        taskId: task.taskId,
        deploymentId: task.deploymentId,
        deploymentVersion: task.deploymentVersion,
        workspaceId: task.workspaceId,
      },
      where: { containerId: served.record.containerId, machineId: this.machineId },
    };
    if (!isPastLastAttempt(retries, attempt)) return attemptOf;
    await this.reportLastAttemptLost(attemptOf);
    return undefined;
  }

  /** JetStream handed the task past its last attempt: that attempt was lost without a word. */
  private async reportLastAttemptLost({ task, attempt, msg, base, where }: Attempt): Promise<void> {
    await this.publish(
      TASK_FAILED,
      {
        ...base,
        // Reported by this machine, which JetStream handed the task once more: the gateway names the lease holder that lost it.
        ...where,
        attempt: attempt - 1,
        cause: 'container-lost',
        error: 'its container or machine was lost during its last attempt',
        willRetry: false,
        failedAt: new Date().toISOString(),
      },
      `${task.taskId}:failed:${attempt - 1}`,
    );
    msg.ack();
  }

  /** Runs one attempt in the container (`call`: alone, or its part of a bunch) and settles its message with the outcome. */
  private async runAttempt(served: Served, a: Attempt, call: (run: Running) => Promise<HandlerOutcome>): Promise<void> {
    const { task, attempt, msg, base, where } = a;
    const { record } = served;
    const run: Running = { containerId: record.containerId, abort: new AbortController() };
    this.running.set(task.taskId, run);
    // Cancelled while it waited for its turn in a bunch.
    if (this.cancelled.has(task.taskId)) {
      run.why = 'cancelled';
      run.abort.abort();
    }
    this.loads.begin(record.containerId);
    const startedAt = Date.now();
    let durationMs: number | undefined;
    const progress = setInterval(() => msg.working(), TASK_PROGRESS_EVERY_MS);
    const timeout = setTimeout(() => {
      run.why = 'timeout';
      run.abort.abort();
    }, task.timeoutSeconds * 1000);
    try {
      // Reported while the handler runs, once it has run TASK_START_REPORT_DELAY_MS: the outcome
      // waits for it, the handler need not. A quicker attempt with an inline result reports none:
      // its completion stands for the start too (withStart).
      let announced: Promise<void> | undefined;
      const announce = () =>
        (announced ??= this.publish(
          TASK_STARTED,
          { ...base, ...where, attempt, startedAt: new Date(startedAt).toISOString() },
          `${task.taskId}:started:${attempt}`,
        ));
      // Awaited below; this catch only keeps a failure before then from counting as unhandled.
      const reportStart = setTimeout(() => {
        announce().catch(() => undefined);
      }, TASK_START_REPORT_DELAY_MS);
      const outcome = await call(run);
      clearTimeout(reportStart);
      // A large result is stored with the gateway, which takes it only from a recorded lease.
      const withStart = !announced && outcome.kind === 'ok' && outcome.json.length <= TASK_RESULT_INLINE_BYTES;
      if (!withStart) await announce();
      // A broken connection is the container dying more often than not: give its exit a moment to be seen.
      if (outcome.kind === 'gone' && !served.gone) await sleep(1000);
      durationMs = Date.now() - startedAt;
      if (outcome.kind === 'aborted' && run.why === 'cancelled') return msg.ack();
      if (outcome.kind === 'ok') await this.reportCompleted(a, outcome.json, durationMs, withStart);
      else
        await this.reportFailed(
          a,
          failureOf(outcome, task.timeoutSeconds, served.stopped && record.containerId),
          durationMs,
          failedForGood(outcome, record.noRetryOn),
        );
    } catch (e) {
      // Could not report (NATS away): leave it to redelivery, which runs it again.
      this.logger.warn({ taskId: task.taskId }, `task ${task.taskId} not settled: ${(e as Error).message}`);
    } finally {
      // Once per attempt, however it ended (cancelled and unsettled ones too).
      this.loads.end(record.containerId, durationMs ?? Date.now() - startedAt);
      this.chunkDurations.ended(task, durationMs ?? Date.now() - startedAt);
      clearInterval(progress);
      clearTimeout(timeout);
      this.running.delete(task.taskId);
    }
  }

  private async reportCompleted(
    { task, attempt, msg, base, where }: Attempt,
    json: Buffer,
    durationMs: number,
    withStart: boolean,
  ): Promise<void> {
    const big = json.length > TASK_RESULT_INLINE_BYTES;
    const result = big
      ? { resultRef: await putResult(this.ctx.settings, task.taskId, attempt, json) }
      : { result: JSON.parse(json.toString('utf8')) as unknown };
    const completed: TaskCompleted = {
      ...base,
      ...where,
      attempt,
      durationMs,
      ...result,
      completedAt: new Date().toISOString(),
      ...(withStart ? { withStart } : {}),
    };
    if (json.length <= BATCHED_RESULT_MAX_BYTES) await this.completions.add(completed);
    else await this.reportCompletions([completed]);
    msg.ack();
  }

  /** Completions in one message: alone as task.completed, several as task.completed-many (its id from its members, so a repeat is stored once). */
  private async reportCompletions(batch: TaskCompleted[]): Promise<void[]> {
    if (batch.length === 1) {
      const [one] = batch as [TaskCompleted];
      await this.publish(TASK_COMPLETED, one, `${one.taskId}:completed:${one.attempt}`);
    } else await this.publish(TASK_COMPLETED_MANY, { machineId: this.machineId, completions: batch }, batchMsgId('completed-many', batch));
    return batch.map(() => undefined);
  }

  /** Reports a failed attempt and naks it with the retry policy's delay, or acks it when it was the last. */
  /** `forGood`: a failure no retry mends (a deliberate 4xx, an error type task_policy.no_retry_on names). */
  private async reportFailed(a: Attempt, [cause, error]: [TaskFailureCause, string], durationMs: number, forGood: boolean): Promise<void> {
    const { task, attempt, msg, base, where } = a;
    const next = forGood ? ({ retry: false } as const) : afterFailure(a.retries, attempt, cause);
    await this.publish(
      TASK_FAILED,
      { ...base, ...where, attempt, cause, error, willRetry: next.retry, durationMs, failedAt: new Date().toISOString() },
      `${task.taskId}:failed:${attempt}`,
    );
    if (next.retry) msg.nak(next.delayMs);
    else msg.ack();
  }

  /** A task event, retried briefly: an outcome must not be lost to a blip. Throws when NATS stays away. */
  private async publish<T extends object>(contract: Contract<T>, payload: T, msgId: string): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.messaging.publish(contract, payload, { msgId });
        return;
      } catch (e) {
        if (attempt >= 5) throw e;
        await sleep(backoffMs(attempt, PUBLISH_RETRY_BACKOFF));
      }
    }
  }
}
