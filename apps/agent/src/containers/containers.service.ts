import { type BeforeApplicationShutdown, Inject, Injectable, Logger } from '@nestjs/common';
import {
  CONTAINER_FAILED,
  CONTAINER_READY,
  CONTAINER_STARTED,
  CONTAINER_STARTING,
  CONTAINER_STOPPED,
  type ContainerStart,
  type ContainerStartReply,
  type ContainerStop,
  type ContainerStopReply,
  type GpuInventory,
  type ContainerIsolation,
  pullsTasks,
} from '#tern/contracts';
import { Messaging, PULL_EXPIRES_MS } from '#tern/messaging';
import { describeCheck, type ExitResult, reconcile, RuncRuntime, waitForHealth } from '#tern/runtime';
import { AGENT_CONTEXT, type AgentContext } from '../agent-context.js';
import { InvokeRoutes } from '../invoke/invoke-routes.js';
import type { ContainerEndpoint } from '../invoke/forward.js';
import { SandboxesService } from '../sandboxes/sandboxes.service.js';
import { ServerLoads } from '../server-loads/server-loads.js';
import { GpuHolders } from './gpu-holders.js';
import { TaskDispatcher } from '../tasks/task-dispatcher.js';
import { containersGauge } from '../metrics.js';
import { type ContainerRowState } from '../state/agent-state.js';
import { allocateGpus, type ContainerRecord, recordFromLabels, recordFromStart, RUNTIME_ID, toContainerSpec } from './container-spec.js';
import { CONTAINER_RUNTIME, type RuntimeHandle } from './container-runtime.provider.js';
import { fetchContainerSecrets } from './container-secrets.js';
import { ContainerEvents } from './container-events.js';
import { ContainerMounts } from './container-mounts.js';
import { describeExit, endpointOf, failurePhase, type Tracked } from './tracked-container.js';
import { fireAndForget, sleep } from '#tern/timing';
import { VolumeMounts } from '../volumes/volume-mounts.js';

/** SIGTERM grace for containers when the agent itself shuts down. */
const SHUTDOWN_GRACE_MS = 5_000;

/**
 * Starts and stops this machine's containers through the runtime and reports their lives as
 * container events (JetStream, Nats-Msg-Id `<container>:<event>`) and their output as log lines
 * (core NATS). Start is idempotent on the container id, stop too. At start-up it reconciles
 * with the runtime: containers labelled as this machine's are adopted (watched and reported on
 * again), anything else is killed, so nothing runs that no one knows about.
 */
@Injectable()
export class ContainersService implements BeforeApplicationShutdown {
  private readonly logger = new Logger('containers');
  private readonly tracked = new Map<string, Tracked>();
  private readonly events: ContainerEvents;
  private readonly mounts: ContainerMounts;

  constructor(
    messaging: Messaging,
    @Inject(CONTAINER_RUNTIME) private readonly handle: RuntimeHandle,
    @Inject(AGENT_CONTEXT) private readonly ctx: AgentContext,
    private readonly invokes: InvokeRoutes,
    private readonly tasks: TaskDispatcher,
    private readonly sandboxes: SandboxesService,
    readonly volumes: VolumeMounts,
    private readonly gpuHolders: GpuHolders,
    private readonly serverLoads: ServerLoads,
  ) {
    this.events = new ContainerEvents(messaging, ctx, this.logger);
    gpuHolders.add(() => [...this.tracked.values()].flatMap((t) => t.record.gpus));
    this.mounts = new ContainerMounts(ctx.settings.stateDir, volumes, () => this.gatewayAccess());
  }

  private gatewayAccess() {
    return { gatewayUrl: this.ctx.settings.gatewayUrl, token: this.ctx.settings.token };
  }

  private get machineId(): string {
    return this.ctx.registration.machineId;
  }

  runningIds(): string[] {
    return [...this.tracked.keys()];
  }

  /** How containers are isolated here, for the heartbeat; undefined without a runtime. */
  isolation(): ContainerIsolation | undefined {
    return this.handle.isolation;
  }

  /** The GPUs containers and sandboxes hold on this machine. */
  busyGpus(): Set<string> {
    return this.gpuHolders.busy();
  }

  // --- reconciliation ------------------------------------------------------------------

  async reconcile(): Promise<void> {
    const runtime = this.handle.runtime;
    if (!runtime) return;
    const report = await reconcile(runtime, {
      decide: (c) => (recordFromLabels(c.id, c.labels, this.machineId) || this.sandboxes.isSandbox(c) ? 'adopt' : 'kill'),
      // Not ours: no one is waiting for a clean exit.
      graceMs: 2000,
    });
    for (const { container } of report.killed)
      this.logger.warn(
        { containerId: container.id, labels: container.labels },
        `killed container ${container.id}: not one of this machine's`,
      );
    for (const c of report.adopted) {
      if (this.sandboxes.isSandbox(c)) {
        await this.sandboxes.adopt(c);
        continue;
      }
      const record = recordFromLabels(c.id, c.labels, this.machineId)!;
      const endpoint = endpointOf(c);
      const t = this.track(record, Date.parse(c.startedAt) || Date.now(), 'running', endpoint);
      this.watch(c.id, t);
      if (endpoint) {
        // It may have become ready while no agent watched; ready was then never reported.
        void waitForHealth({
          ...endpoint,
          ...(record.healthCheck ? { check: record.healthCheck } : {}),
          timeoutMs: 2000,
          signal: t.abort.signal,
        }).then(
          () => {
            this.setState(c.id, 'ready');
            this.serve(t, endpoint);
          },
          () => undefined,
        );
      }
      this.logger.log({ containerId: c.id, deploymentId: record.deploymentId }, `adopted container ${c.id} after a restart`);
    }
    for (const { container, exit, removed } of report.exited) {
      if (removed || this.sandboxes.isSandbox(container)) continue;
      // Ours, and it ended while no agent watched: report it, then clean up.
      const record = recordFromLabels(container.id, container.labels, this.machineId)!;
      const t = this.track(record, Date.parse(container.startedAt) || Date.now(), 'running', endpointOf(container));
      t.stopReason = 'exited while the agent was not running';
      t.done = this.finish(container.id, t, exit ?? { exitCode: null, oomKilled: false, finishedAt: new Date().toISOString() });
    }
    for (const { container, error } of report.failed)
      this.logger.error({ containerId: container.id }, `could not reconcile container ${container.id}: ${error.message}`);
  }

  // --- commands ------------------------------------------------------------------------

  start(cmd: ContainerStart): ContainerStartReply {
    const runtime = this.handle.runtime;
    if (this.tracked.has(cmd.containerId)) return { accepted: true, reason: 'already known to this agent' };
    if (!runtime) return { accepted: false, reason: `no container runtime on this machine: ${this.handle.problem}` };
    if (!RUNTIME_ID.test(cmd.containerId))
      return { accepted: false, reason: `container id "${cmd.containerId}" must start with a letter or digit` };
    const gpus = allocateGpus(this.ctx.state.gpus, this.busyGpus(), cmd.resources.gpuCount, cmd.resources.gpuType);
    if (!gpus.ok) return { accepted: false, reason: gpus.reason };
    const t = this.track(recordFromStart(cmd, gpus.gpus), Date.now(), 'starting');
    this.logger.log(
      { containerId: cmd.containerId, deploymentId: cmd.deploymentId, image: cmd.image },
      `starting container ${cmd.containerId}`,
    );
    fireAndForget(`running container ${cmd.containerId}`, this.logger, this.run(cmd, t, gpus.gpus));
    return { accepted: true };
  }

  stop(cmd: ContainerStop): ContainerStopReply {
    const t = this.tracked.get(cmd.containerId);
    if (!t) return { accepted: true, reason: 'no such container on this machine (already gone)' };
    this.requestStop(cmd.containerId, t, `stop command: ${cmd.reason}`, cmd.graceSeconds * 1000);
    return { accepted: true };
  }

  // --- lifecycle -----------------------------------------------------------------------

  private track(record: ContainerRecord, acceptedAt: number, state: ContainerRowState, endpoint?: ContainerEndpoint): Tracked {
    const t: Tracked = { record, acceptedAt, state, endpoint, abort: new AbortController(), logSequence: 0 };
    this.tracked.set(record.containerId, t);
    containersGauge.set(this.tracked.size);
    this.ctx.state.upsertContainer({
      id: record.containerId,
      state,
      deployment: `${record.deploymentId}:v${record.deploymentVersion}`,
      startedAt: acceptedAt,
    });
    this.ctx.state.busyGpus = this.busyGpus();
    return t;
  }

  private setState(id: string, state: ContainerRowState, extra: { endedAt?: number; exitCode?: number | null; detail?: string } = {}) {
    const t = this.tracked.get(id);
    if (t) t.state = state;
    this.ctx.state.upsertContainer({ id, state, ...extra });
  }

  private async run(cmd: ContainerStart, t: Tracked, gpus: GpuInventory[]) {
    const runtime = this.handle.runtime!;
    const id = cmd.containerId;
    // Announced while the start goes on (publish never throws); awaited before the next event,
    // so consumers still see starting before started or failed.
    const starting = this.events.publish(CONTAINER_STARTING, t.record, 'starting', {});
    let endpoint: ContainerEndpoint | undefined;
    // A pull shows in the container's logs (tern logs) and on the dashboard while it runs.
    const onPull = (ref: string, line: string) => {
      if (ref === cmd.image) this.events.line(t, 'stdout', `[tern] image: ${line}`);
    };
    this.handle.pulls?.on('progress', onPull);
    try {
      // The image is pulled while the volumes mount (the start then finds it prepared): a model's
      // weights and its libraries come down side by side, not one after the other.
      // Each phase's end, in seconds since the command came: where a slow cold start's time went.
      const since = () => ((Date.now() - t.acceptedAt) / 1000).toFixed(2);
      const ended: Record<string, string> = {};
      const pulled = runtime instanceof RuncRuntime ? runtime.image(cmd.image) : undefined;
      // Its failure is the start's, once the mounts are done.
      pulled?.then(() => (ended.image = since())).catch(() => undefined);
      const mounts = await this.mounts.prepare(cmd);
      ended.volumes = since();
      await pulled;
      const secretEnv = cmd.secrets?.length ? await fetchContainerSecrets(this.gatewayAccess(), id) : {};
      const spec = toContainerSpec(cmd, this.machineId, gpus, mounts, this.handle.isolation?.network);
      spec.env = { ...spec.env, ...secretEnv };
      const running = await runtime.start(spec);
      ended.runtime = since();
      endpoint = endpointOf(running);
      t.endpoint = endpoint;
      this.logger.log(
        { containerId: id, secondsToEnd: ended },
        `container ${id} started ${ended.runtime} s after its command: volumes mounted at ${ended.volumes} s, image ready at ${ended.image ?? '-'} s`,
      );
    } catch (e) {
      const phase = failurePhase(e);
      const error = (e as Error).message;
      this.logger.warn({ containerId: id, phase }, `container ${id} did not start: ${error}`);
      await starting;
      await this.events.publish(CONTAINER_FAILED, t.record, 'failed', { phase, error, lastLines: this.events.lastLines(id) });
      this.untrack(id, 'failed', { endedAt: Date.now(), detail: error });
      return;
    } finally {
      this.handle.pulls?.off('progress', onPull);
    }
    this.setState(id, 'running');
    await starting;
    await this.events.publish(CONTAINER_STARTED, t.record, 'started', {
      resources: {
        cpuMillicores: cmd.resources.cpuMillicores,
        memoryBytes: cmd.resources.memoryBytes,
        gpuCount: cmd.resources.gpuCount,
        ...(cmd.resources.gpuType ? { gpuType: cmd.resources.gpuType } : {}),
      },
      startupLatencyMs: Date.now() - t.acceptedAt,
    });
    let exited = false;
    this.watch(id, t, () => (exited = true));
    if (!endpoint) return;
    const where = `${endpoint.host}:${endpoint.port}`;
    try {
      await waitForHealth({
        ...endpoint,
        ...(cmd.healthCheck ? { check: cmd.healthCheck } : {}),
        timeoutMs: cmd.startupTimeoutSeconds * 1000,
        signal: t.abort.signal,
        gaveUp: async () => exited || !!t.stopReason,
        onMiss: (why) => (t.notReady = `${describeCheck(cmd.healthCheck)}: ${why}`),
      });
      t.notReady = undefined;
      if (t.stopReason || exited) return;
      this.setState(id, 'ready');
      // Serve invokes before announcing ready: the route appears when the scheduler hears of it.
      this.serve(t, endpoint);
      await this.events.publish(CONTAINER_READY, t.record, 'ready', { readyLatencyMs: Date.now() - t.acceptedAt });
      this.logger.log({ containerId: id, ...endpoint }, `container ${id} is ready on ${where}`);
    } catch (e) {
      if (t.stopReason || exited || t.abort.signal.aborted) return;
      const error = `not ready within ${cmd.startupTimeoutSeconds} s: ${(e as Error).message}`;
      t.failed = true;
      // In the container's own log too, where its owner looks (tern logs).
      this.events.line(t, 'stderr', `[tern] ${error}`);
      await this.events.publish(CONTAINER_FAILED, t.record, 'failed', { phase: 'health', error, lastLines: this.events.lastLines(id) });
      this.requestStop(id, t, 'failed its health check', 5000);
    }
  }

  /** Follows the container's output and waits for its exit, then reports and removes it. */
  private watch(id: string, t: Tracked, onExit?: () => void) {
    const runtime = this.handle.runtime!;
    t.logs = this.followLogs(id, t);
    t.done = runtime.wait(id, t.abort.signal).then(
      (exit) => {
        onExit?.();
        return this.finish(id, t, exit);
      },
      (e: Error) => {
        if (!t.abort.signal.aborted) this.logger.warn(`lost track of container ${id}: ${e.message}`);
      },
    );
  }

  private async followLogs(id: string, t: Tracked): Promise<void> {
    try {
      for await (const l of this.handle.runtime!.logs(id, { follow: true, signal: t.abort.signal }))
        this.events.line(t, l.stream, l.line, l.time);
    } catch (e) {
      if (!t.abort.signal.aborted) this.logger.warn(`log stream of ${id} ended: ${(e as Error).message}`);
    }
  }

  private async finish(id: string, t: Tracked, exit: ExitResult) {
    // Let the tail drain what the process wrote last before the container goes away.
    await Promise.race([t.logs, new Promise((r) => setTimeout(r, 2000))]);
    const expected = !!t.stopReason;
    const crashed = !expected && (exit.oomKilled || exit.exitCode !== 0);
    const how = describeExit(exit, t.notReady);
    const ended = { at: exit.finishedAt, untilSent: true };
    if (crashed && !t.failed) {
      const code = exit.exitCode !== null && !exit.signal ? { exitCode: exit.exitCode } : {};
      await this.events.publish(
        CONTAINER_FAILED,
        t.record,
        'failed',
        { phase: 'runtime', error: how, ...code, lastLines: this.events.lastLines(id) },
        ended,
      );
    }
    const reason = t.stopReason ?? (exit.oomKilled ? 'oom' : 'exited');
    // Before container.stopped: the gateway takes a commit only while the container is placed here.
    await this.mounts.closeSocket(id);
    await this.volumes
      .release(id)
      .then((reports) => this.events.stopCommits(t, reports))
      .catch((e: Error) => this.logger.error({ containerId: id }, `volumes of container ${id} not committed: ${e.message}`));
    await this.events.publish(
      CONTAINER_STOPPED,
      t.record,
      'stopped',
      {
        exitCode: exit.exitCode,
        oomKilled: exit.oomKilled,
        reason,
        ...(exit.signal ? { signal: exit.signal } : {}),
      },
      ended,
    );
    this.logger.log(
      { containerId: id, exitCode: exit.exitCode, oomKilled: exit.oomKilled, signal: exit.signal },
      `container ${id} ${how} (${reason})`,
    );
    t.abort.abort();
    await this.handle.runtime?.remove(id).catch((e: Error) => this.logger.warn(`could not remove container ${id}: ${e.message}`));
    this.untrack(id, crashed || t.failed ? 'failed' : 'stopped', { endedAt: Date.now(), exitCode: exit.exitCode });
  }

  /** A ready container takes work: invokes always, tasks when it is a task queue's. */
  private serve(t: Tracked, endpoint: ContainerEndpoint) {
    this.invokes.serve(t.record.containerId, endpoint, t.record.workers * t.record.concurrency);
    if (pullsTasks(t.record.kind)) this.tasks.serve(t.record, endpoint);
    this.serverLoads.track(t.record, endpoint);
  }

  /** `alive`: the container still runs (it is being stopped), so a task its last pull brings runs in it. */
  private unserve(id: string, alive = false): Promise<void> {
    this.invokes.drop(id);
    this.serverLoads.untrack(id);
    return this.tasks.drop(id, alive);
  }

  private requestStop(id: string, t: Tracked, reason: string, graceMs: number) {
    if (t.stopReason) return;
    t.stopReason = reason;
    // Its task pulls end first (within a pull's expiry), so no task is handed back unrun.
    const drained = Promise.race([this.unserve(id, true), sleep(PULL_EXPIRES_MS + 1000)]);
    this.setState(id, 'stopping');
    const stopping = drained.then(() => this.handle.runtime?.stop(id, graceMs));
    stopping.catch((e: Error) => this.logger.warn(`stopping container ${id} failed: ${e.message}`));
  }

  private untrack(id: string, state: ContainerRowState, extra: { endedAt?: number; exitCode?: number | null; detail?: string }) {
    fireAndForget('dropping its task pulls', this.logger, this.unserve(id));
    this.tracked.delete(id);
    containersGauge.set(this.tracked.size);
    this.setState(id, state, extra);
    this.ctx.state.busyGpus = this.busyGpus();
  }

  /**
   * On the way out: unless the runner is only swapping NATS sessions, stop every container
   * (they would otherwise run on with no one reporting on them) and wait for their reports.
   */
  async beforeApplicationShutdown() {
    const keep = this.ctx.keepContainers;
    const all = [...this.tracked.entries()];
    if (!keep && all.length) {
      this.logger.log(`stopping ${all.length} container(s) before the agent exits`);
      for (const [id, t] of all) this.requestStop(id, t, 'agent shutting down', SHUTDOWN_GRACE_MS);
      await Promise.race([Promise.allSettled(all.map(([, t]) => t.done)), new Promise((r) => setTimeout(r, SHUTDOWN_GRACE_MS + 5000))]);
    }
    for (const [, t] of this.tracked) t.abort.abort();
  }
}
