import { Controller, Inject } from '@nestjs/common';
import { Ctx, Payload } from '@nestjs/microservices';
import {
  CONTAINER_FAILED,
  CONTAINER_READY,
  CONTAINER_SCHEDULED,
  ContainerFailed,
  ContainerReady,
  ContainerScheduled,
  MACHINE_BEAT,
  MACHINE_FAULT,
  MACHINE_HEARTBEAT,
  MACHINE_STATE_CHANGED,
  MachineFault,
  MachineHeartbeat,
  MachineStateChanged,
  SANDBOX_ENDED,
  SANDBOX_STARTED,
  SANDBOX_USAGE_DEPLOYMENT,
  SandboxEnded,
  SandboxLifecycle,
  TASK_ATTEMPT_ENDED,
  TASK_ATTEMPTS_ENDED,
  TASK_SPOT_CHECK_ENDED,
  TaskAttemptEnded,
  TaskAttemptsEnded,
  TaskSpotCheckEnded,
} from '#tern/contracts';
import { JetStreamContext, OnEvent, OnMessage } from '#tern/messaging';
import {
  applyObservedFault,
  applyObservedReady,
  applyStartCommand,
  applyStartOutcome,
  applyState,
  applyTaskOutcome,
  commandedAt,
  type ReputationParams,
  startFailureOutcome,
  taskFailureOutcome,
} from '#tern/reputation';
import { MachineBook } from '../scores/machine-book.js';
import { readiesRefused } from '../scores/metrics.js';
import { REPUTATION_PARAMS } from '../scores/reputation-params.js';
import { Scorer } from '../scores/scorer.js';

/**
 * Handlers queue their change and wait for it to be stored (changes of 50 ms in one
 * transaction), so many in flight keep throughput up while records still change in delivery order.
 */
const MANY = 64;

/**
 * Every machine beats every period: as many beats in hand as the consumer lets be unacknowledged
 * (its max_ack_pending), so one flush stores them all. With 64, a flush every 50 ms capped the
 * consumer at ~1,000 beats a second however idle the process (bench/agents: 10,000 agents).
 */
const BEATS_IN_HAND = 1000;

/**
 * Core NATS beats held at once, waiting for their flush, before more are dropped (a dropped beat
 * counts as skipped): twenty flushes' worth at 20,000 agents, bounded so a stalled database
 * cannot grow the process without end.
 */
const CORE_BEATS_IN_HAND = 20_000;

/**
 * The start command and the ready travel on separate consumers, so a ready may be seen first:
 * it is asked again until this long after it reached NATS, then refused.
 */
const COMMAND_WAIT_MS = 30_000;

/**
 * The facts a reputation is built from, each through its own durable consumer replayed from
 * the start of its stream when first created (EVENTS keeps 30 days), so a new installation of
 * the service learns the history it missed. Every replica binds the same consumers, so each event
 * is handled by one of them. Handlers return once the change is stored; the message is
 * acknowledged then. Heartbeats are core NATS in the service's queue group instead, stored nowhere:
 * a replica hears each beat once, and MachineBook skips the times no replica heard them.
 */
@Controller()
export class ReputationEventsController {
  constructor(
    private readonly book: MachineBook,
    private readonly scorer: Scorer,
    @Inject(REPUTATION_PARAMS) private readonly params: ReputationParams,
  ) {}

  /** A pending machine has not joined yet: its record starts when it registers. */
  @OnMessage(MACHINE_STATE_CHANGED)
  stateChanged(@Payload() e: MachineStateChanged) {
    if (e.to === 'pending') return;
    return this.change(e.machineId, e.pool, (r) => applyState(r, e.to !== 'offline', Date.parse(e.changedAt), Date.now()));
  }

  /**
   * Arrival is what punctuality judges: when this replica heard the beat, the control plane's
   * own observation, never the agent's sentAt. A beat sent while no replica listened is lost:
   * the book skips those times rather than count them against the machine.
   * No nudge to the scorer: every machine beats every period, so a pass soon after each beat
   * would score the whole fleet several times a second (bench/agents README); punctuality moves
   * slowly, and the scorer's own period (REPUTATION_RECOMPUTE_INTERVAL_MS) picks it up.
   */
  @OnEvent(MACHINE_BEAT, { maxInFlight: CORE_BEATS_IN_HAND })
  beat(@Payload() beat: MachineHeartbeat, @Ctx() ctx: JetStreamContext) {
    return this.book.heartbeat(beat.machineId, beat.pool, beat.sequence, ctx.receivedAt!, true);
  }

  /**
   * The previous release's agents, for one release more (MACHINE_HEARTBEAT): timed by when the
   * NATS server stored the beat, the same for a live beat and a backlog replayed after a restart.
   */
  @OnMessage(MACHINE_HEARTBEAT, { concurrency: BEATS_IN_HAND })
  async heartbeat(@Payload() beat: MachineHeartbeat, @Ctx() ctx: JetStreamContext) {
    const arrival = ctx.delivery!.storedAt.getTime();
    await this.book.heartbeat(beat.machineId, beat.pool, beat.sequence, arrival, false);
  }

  /** The scheduler's start command: when it reached NATS is when the start's latency begins. */
  @OnMessage(CONTAINER_SCHEDULED, { concurrency: MANY })
  containerScheduled(@Payload() e: ContainerScheduled, @Ctx() ctx: JetStreamContext) {
    const at = ctx.delivery!.storedAt.getTime();
    return this.change(e.machineId, undefined, (r) => applyStartCommand(r, e.containerId, at));
  }

  /**
   * A successful start, timed by the control plane: from its start command to when the ready
   * reached NATS (the agent's readyLatencyMs and `at` are not believed). A ready for a container
   * the scheduler never commanded this machine to start counts nothing: refused and counted.
   */
  @OnMessage(CONTAINER_READY, { concurrency: MANY })
  async containerReady(@Payload() e: ContainerReady, @Ctx() ctx: JetStreamContext) {
    const delivery = ctx.delivery!;
    const readyAt = delivery.storedAt.getTime();
    // Read from the table: another replica may have handled the start command.
    if (commandedAt(await this.book.read(e.machineId), e.containerId) === undefined) {
      if (Date.now() - readyAt < COMMAND_WAIT_MS) return delivery.retryLater(Math.min(5000, 500 * delivery.deliveryCount));
      readiesRefused.inc({ reason: 'not-commanded' });
      return delivery.reject(`container ${e.containerId} was never commanded to start on machine ${e.machineId}`);
    }
    await this.change(e.machineId, undefined, (r) => applyObservedReady(r, e.containerId, e.deploymentId, readyAt, this.params));
  }

  /**
   * Before it was ready: a failed start, the machine's own fault when the machine was lost.
   * After: already counted. Dated when it reached NATS; its start command is spent.
   */
  @OnMessage(CONTAINER_FAILED, { concurrency: MANY })
  containerFailed(@Payload() e: ContainerFailed, @Ctx() ctx: JetStreamContext) {
    const outcome = startFailureOutcome(e.phase);
    const at = ctx.delivery!.storedAt.getTime();
    return this.change(e.machineId, undefined, (r) => {
      delete r.commands?.[e.containerId];
      applyStartOutcome(r, e.containerId, e.deploymentId, outcome, at, this.params);
    });
  }

  /**
   * A fault the scheduler saw itself (a start command unanswered, a start past its limit, a
   * container lost with its machine): counted in full against the machine, dated when the
   * scheduler recorded it. The agent's word cannot soften it: only the scheduler publishes it.
   */
  @OnMessage(MACHINE_FAULT, { concurrency: MANY })
  machineFault(@Payload() f: MachineFault) {
    return this.change(f.machineId, undefined, (r) => applyObservedFault(r, f, Date.parse(f.at), this.params));
  }

  /** A sandbox's start counts like a container's (the gateway saw it run; no latency of the agent's own). */
  @OnMessage(SANDBOX_STARTED, { concurrency: MANY })
  sandboxStarted(@Payload() e: SandboxLifecycle) {
    return this.change(e.machineId, undefined, (r) =>
      applyStartOutcome(r, e.sandboxId, SANDBOX_USAGE_DEPLOYMENT, 'success', Date.parse(e.at), this.params),
    );
  }

  /** A sandbox that never ran, or lost with its machine (after a start, already counted: as for containers). */
  @OnMessage(SANDBOX_ENDED, { concurrency: MANY })
  sandboxEnded(@Payload() e: SandboxEnded) {
    if (e.state === 'terminated') return;
    const outcome = startFailureOutcome(e.state === 'lost' ? 'machine-lost' : 'create');
    return this.change(e.machineId, undefined, (r) =>
      applyStartOutcome(r, e.sandboxId, SANDBOX_USAGE_DEPLOYMENT, outcome, Date.parse(e.at), this.params),
    );
  }

  /**
   * Task outcomes only as the gateway accepted them from the holder of the attempt's lease
   * (task.attempt-ended), on the lease's machine: never an agent's word about a task. A handler
   * error is judged against the deployment's other machines; a timeout or a lost container
   * counts in full.
   */
  @OnMessage(TASK_ATTEMPT_ENDED, { concurrency: MANY })
  taskAttemptEnded(@Payload() e: TaskAttemptEnded) {
    const outcome = e.outcome === 'completed' ? 'success' : taskFailureOutcome(e.cause ?? 'error');
    return this.change(e.machineId, undefined, (r) =>
      applyTaskOutcome(r, `task:${e.taskId}:${e.attempt}`, e.deploymentId, outcome, Date.parse(e.endedAt), this.params),
    );
  }

  /** Several accepted outcomes in one message (task.attempts-ended): each as a lone one, counted once per attempt by its key. */
  @OnMessage(TASK_ATTEMPTS_ENDED, { concurrency: 16 })
  async taskAttemptsEnded(@Payload() e: TaskAttemptsEnded) {
    await Promise.all(e.attempts.map((a) => this.taskAttemptEnded(a)));
  }

  /**
   * A spot check's verdict, by the gateway's own comparison: a result that disagreed with a
   * verifier of higher reputation counts in full against the machine that returned it, as one
   * more task attempt it failed (its completion had counted as a success). Agreement adds nothing:
   * the attempt counted already.
   */
  @OnMessage(TASK_SPOT_CHECK_ENDED, { concurrency: MANY })
  spotCheckEnded(@Payload() e: TaskSpotCheckEnded) {
    if (e.verdict !== 'disagreed') return;
    return this.change(e.machineId, undefined, (r) =>
      applyTaskOutcome(r, `spot:${e.taskId}`, e.deploymentId, 'machine', Date.parse(e.at), this.params),
    );
  }

  private async change(machineId: string, pool: string | undefined, apply: Parameters<MachineBook['update']>[2]) {
    await this.book.update(machineId, pool, apply);
    this.scorer.nudge(machineId);
  }
}
