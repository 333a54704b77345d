import { Controller, Inject } from '@nestjs/common';
import { Ctx, Payload } from '@nestjs/microservices';
import {
  CONTAINER_FAILED,
  CONTAINER_READY,
  ContainerFailed,
  ContainerReady,
  MACHINE_HEARTBEAT,
  MACHINE_NETWORK_TESTED,
  MACHINE_STATE_CHANGED,
  MachineHeartbeat,
  MachineNetworkTested,
  MachineStateChanged,
  SANDBOX_ENDED,
  SANDBOX_STARTED,
  SANDBOX_USAGE_DEPLOYMENT,
  SandboxEnded,
  SandboxLifecycle,
  TASK_COMPLETED,
  TASK_FAILED,
  TaskCompleted,
  TaskFailed,
} from '#tern/contracts';
import { JetStreamContext, OnMessage } from '#tern/messaging';
import {
  applyHeartbeat,
  applyNetworkTest,
  applyStartOutcome,
  applyState,
  applyTaskOutcome,
  type ReputationParams,
  startFailureOutcome,
  taskFailureOutcome,
} from '#tern/reputation';
import { MachineBook } from '../scores/machine-book.js';
import { REPUTATION_PARAMS } from '../scores/reputation-params.js';
import { Scorer } from '../scores/scorer.js';

/**
 * Handlers apply their change synchronously and then wait for it to be stored (batched every
 * 50 ms), so many in flight keep throughput up while records still change in delivery order.
 */
const MANY = 64;

/**
 * The facts a reputation is built from, each through its own durable consumer replayed from
 * the start of its stream when first created (EVENTS keeps 30 days, HEARTBEATS one hour), so a
 * new installation of the service learns the history it missed. Handlers return once the
 * change is stored; the message is acknowledged then.
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
   * Arrival is what punctuality judges: when the NATS server stored the beat, the control
   * plane's own observation, never the agent's sentAt. The same for a live beat and for a
   * backlog replayed after a restart, so the restart does not look like late beats either.
   */
  @OnMessage(MACHINE_HEARTBEAT, { concurrency: MANY })
  heartbeat(@Payload() beat: MachineHeartbeat, @Ctx() ctx: JetStreamContext) {
    const arrival = ctx.delivery!.storedAt.getTime();
    return this.change(beat.machineId, beat.pool, (r) => applyHeartbeat(r, beat.sequence, arrival, this.params));
  }

  @OnMessage(MACHINE_NETWORK_TESTED)
  networkTested(@Payload() t: MachineNetworkTested) {
    return this.change(t.machineId, undefined, (r) =>
      applyNetworkTest(r, {
        throughputMbps: Math.min(t.nats.throughputMbps, t.http.throughputMbps),
        latencyMs: t.nats.latencyMs,
        failed: !!(t.nats.error || t.http.error),
        testedAt: Date.parse(t.testedAt),
      }),
    );
  }

  /** Start latency: the agent's own measure from the start command to the first passing health check (no clock skew). */
  @OnMessage(CONTAINER_READY, { concurrency: MANY })
  containerReady(@Payload() e: ContainerReady) {
    return this.change(e.machineId, undefined, (r) =>
      applyStartOutcome(r, e.containerId, e.deploymentId, 'success', Date.parse(e.at), this.params, e.readyLatencyMs),
    );
  }

  /** Before it was ready: a failed start, the machine's own fault when the machine was lost. After: already counted. */
  @OnMessage(CONTAINER_FAILED, { concurrency: MANY })
  containerFailed(@Payload() e: ContainerFailed) {
    const outcome = startFailureOutcome(e.phase);
    return this.change(e.machineId, undefined, (r) =>
      applyStartOutcome(r, e.containerId, e.deploymentId, outcome, Date.parse(e.at), this.params),
    );
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

  @OnMessage(TASK_COMPLETED, { concurrency: MANY })
  taskCompleted(@Payload() e: TaskCompleted) {
    return this.change(e.machineId, undefined, (r) =>
      applyTaskOutcome(r, `task:${e.taskId}:${e.attempt}`, e.deploymentId, 'success', Date.parse(e.completedAt), this.params),
    );
  }

  /** A handler error is judged against the deployment's other machines; a timeout or a lost container counts in full. */
  @OnMessage(TASK_FAILED, { concurrency: MANY })
  taskFailed(@Payload() e: TaskFailed) {
    if (!e.machineId) return; // failed before reaching a machine: nobody's record
    const outcome = taskFailureOutcome(e.cause);
    return this.change(e.machineId, undefined, (r) =>
      applyTaskOutcome(r, `task:${e.taskId}:${e.attempt}`, e.deploymentId, outcome, Date.parse(e.failedAt), this.params),
    );
  }

  private async change(machineId: string, pool: string | undefined, apply: Parameters<MachineBook['update']>[2]) {
    await this.book.update(machineId, pool, apply);
    this.scorer.nudge();
  }
}
