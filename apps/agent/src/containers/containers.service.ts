import { type BeforeApplicationShutdown, Inject, Injectable, Logger } from '@nestjs/common';
import { join } from 'node:path';
import {
  CONTAINER_FAILED,
  CONTAINER_LOG_LINE,
  CONTAINER_READY,
  CONTAINER_STARTED,
  CONTAINER_STARTING,
  CONTAINER_STOPPED,
  CRASH_LOG_LINE_CHARS,
  CRASH_LOG_LINES,
  type ContainerFailurePhase,
  type ContainerStart,
  type ContainerStartReply,
  type ContainerStop,
  type ContainerStopReply,
  type Contract,
  type GpuInventory,
  type ContainerIsolation,
  pullsTasks,
  type VolumeCommitAnswer,
} from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import { backoffMs, sleep } from '#tern/timing';
import {
  ContainerStartError,
  describeCheck,
  type ExitResult,
  ImageError,
  InvalidContainerSpecError,
  reconcile,
  waitForHealth,
} from '#tern/runtime';
import { AGENT_CONTEXT, type AgentContext } from '../agent-context.js';
import { CodeBundleError, CodeBundles } from '../code/code-bundles.js';
import { findPythonSdkDir, findRunnersDir } from '../code/runners-dir.js';
import { InvokeRoutes } from '../invoke/invoke-routes.js';
import type { ContainerEndpoint } from '../invoke/forward.js';
import { SandboxesService } from '../sandboxes/sandboxes.service.js';
import { GpuHolders } from './gpu-holders.js';
import { TaskDispatcher } from '../tasks/task-dispatcher.js';
import { containerEventsTotal, containersGauge } from '../metrics.js';
import { type ContainerRowState } from '../state/agent-state.js';
import {
  type AgentMounts,
  allocateGpus,
  type ContainerRecord,
  recordFromLabels,
  recordFromStart,
  RUNTIME_ID,
  toContainerSpec,
} from './container-spec.js';
import { CONTAINER_RUNTIME, type RuntimeHandle } from './container-runtime.provider.js';
import { ContainerSecretsError, fetchContainerSecrets } from './container-secrets.js';
import { fireAndForget } from '#tern/timing';
import { CommitSockets } from '../volumes/commit-sockets.js';
import { VolumeMountError, VolumeMounts } from '../volumes/volume-mounts.js';

/** One container this agent looks after. */
interface Tracked {
  record: ContainerRecord;
  /** When the start command arrived (ms), for the latencies. */
  acceptedAt: number;
  endpoint?: ContainerEndpoint;
  state: ContainerRowState;
  /** Set by a stop command (or shutdown): the exit is then expected. */
  stopReason?: string;
  /** container.failed already sent (a failed health check), so the exit does not send another. */
  failed?: boolean;
  /** Until it is ready: the last readiness probe's outcome (`GET /health: answered 404`), for a failure before then. */
  notReady?: string;
  /** Aborts the health check and the log tail. */
  readonly abort: AbortController;
  logs?: Promise<void>;
  /** Resolves once container.stopped is out and the container removed. */
  done?: Promise<void>;
  logSequence: number;
}

/** Where the agent reaches a container's $PORT: its own address on a private network, else loopback. */
function endpointOf(c: { port?: number; address?: string }): ContainerEndpoint | undefined {
  return c.port === undefined ? undefined : { host: c.address ?? '127.0.0.1', port: c.port };
}

/** Longest log line sent over NATS; the rest is cut (the runtime already splits runaway lines). */
const MAX_LOG_LINE = 16 * 1024;
/** SIGTERM grace for containers when the agent itself shuts down. */
const SHUTDOWN_GRACE_MS = 5_000;

/** Between tries of a container event: 1 s, 2 s, 4 s … at most 30 s. */
const EVENT_RETRY_BACKOFF = { firstMs: 1000, maxMs: 30_000 };

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
  private readonly code: CodeBundles;
  private readonly commitSockets: CommitSockets;
  private readonly runnersDir = findRunnersDir();
  private readonly pythonSdkDir = findPythonSdkDir(this.runnersDir);

  constructor(
    private readonly messaging: Messaging,
    @Inject(CONTAINER_RUNTIME) private readonly handle: RuntimeHandle,
    @Inject(AGENT_CONTEXT) private readonly ctx: AgentContext,
    private readonly invokes: InvokeRoutes,
    private readonly tasks: TaskDispatcher,
    private readonly sandboxes: SandboxesService,
    readonly volumes: VolumeMounts,
    private readonly gpuHolders: GpuHolders,
  ) {
    gpuHolders.add(() => [...this.tracked.values()].flatMap((t) => t.record.gpus));
    this.code = new CodeBundles(join(ctx.settings.stateDir, 'code'), () => this.gatewayAccess());
    this.commitSockets = new CommitSockets(join(ctx.settings.stateDir, 'volumes', 'sockets'), this.volumes);
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
    const starting = this.publish(CONTAINER_STARTING, t.record, 'starting', {});
    let endpoint: ContainerEndpoint | undefined;
    try {
      const mounts = await this.mounts(cmd);
      const secretEnv = cmd.secrets?.length ? await fetchContainerSecrets(this.gatewayAccess(), id) : {};
      // A pull shows in the container's logs (tern logs) and on the dashboard while it runs.
      const onPull = (ref: string, line: string) => {
        if (ref === cmd.image) this.emitLine(id, t, 'stdout', `[tern] image: ${line}`, new Date());
      };
      this.handle.pulls?.on('progress', onPull);
      const spec = toContainerSpec(cmd, this.machineId, gpus, mounts, this.handle.isolation?.network);
      spec.env = { ...spec.env, ...secretEnv };
      const running = await runtime.start(spec).finally(() => this.handle.pulls?.off('progress', onPull));
      endpoint = endpointOf(running);
      t.endpoint = endpoint;
    } catch (e) {
      const phase: ContainerFailurePhase =
        e instanceof ImageError || e instanceof CodeBundleError || e instanceof VolumeMountError
          ? 'image'
          : e instanceof InvalidContainerSpecError || e instanceof ContainerSecretsError
            ? 'create'
            : e instanceof ContainerStartError
              ? 'start'
              : 'create';
      const error = (e as Error).message;
      this.logger.warn({ containerId: id, phase }, `container ${id} did not start: ${error}`);
      await starting;
      await this.publish(CONTAINER_FAILED, t.record, 'failed', { phase, error, lastLines: this.lastLines(id) });
      this.untrack(id, 'failed', { endedAt: Date.now(), detail: error });
      return;
    }
    this.setState(id, 'running');
    await starting;
    await this.publish(CONTAINER_STARTED, t.record, 'started', {
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
      await this.publish(CONTAINER_READY, t.record, 'ready', { readyLatencyMs: Date.now() - t.acceptedAt });
      this.logger.log({ containerId: id, ...endpoint }, `container ${id} is ready on ${where}`);
    } catch (e) {
      if (t.stopReason || exited || t.abort.signal.aborted) return;
      const error = `not ready within ${cmd.startupTimeoutSeconds} s: ${(e as Error).message}`;
      t.failed = true;
      // In the container's own log too, where its owner looks (tern logs).
      this.emitLine(id, t, 'stderr', `[tern] ${error}`, new Date());
      await this.publish(CONTAINER_FAILED, t.record, 'failed', { phase: 'health', error, lastLines: this.lastLines(id) });
      this.requestStop(id, t, 'failed its health check', 5000);
    }
  }

  /**
   * The host directories a start needs: its code bundle (ContainerStart.code, or a TERN_CODE
   * env for commands that predate the field) and, for a handler, Tern's runners.
   */
  private async mounts(cmd: ContainerStart): Promise<AgentMounts> {
    const digest = cmd.code ?? cmd.env.TERN_CODE;
    const mounts: AgentMounts = {};
    if (digest) mounts.codeDir = await this.code.ensure(digest);
    if (cmd.volumes.length) mounts.volumeDirs = await this.volumes.mount(cmd);
    if (cmd.volumes.some((v) => !v.readOnly)) mounts.agentSocketDir = await this.commitSockets.open(cmd.containerId);
    if (cmd.handler && !cmd.command?.length) {
      if (!this.runnersDir)
        throw new CodeBundleError(
          `cannot run handler "${cmd.handler}": Tern's runners are not installed with this agent (set AGENT_RUNNERS_DIR)`,
        );
      mounts.runnersDir = this.runnersDir;
      mounts.pythonSdkDir = this.pythonSdkDir;
    }
    return mounts;
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
        this.emitLine(id, t, l.stream, l.line, l.time);
    } catch (e) {
      if (!t.abort.signal.aborted) this.logger.warn(`log stream of ${id} ended: ${(e as Error).message}`);
    }
  }

  /** One log line of a container: on the dashboard and on its log subject (tern logs). */
  private emitLine(id: string, t: Tracked, stream: 'stdout' | 'stderr', line: string, at: Date): void {
    this.ctx.state.appendLog(id, stream === 'stderr' ? `! ${line}` : line);
    this.messaging.emit(
      CONTAINER_LOG_LINE,
      {
        containerId: id,
        deploymentId: t.record.deploymentId,
        stream,
        line: line.length > MAX_LOG_LINE ? line.slice(0, MAX_LOG_LINE) : line,
        sequence: t.logSequence++,
        at: at.toISOString(),
      },
      [this.machineId, t.record.deploymentId, id],
    );
  }

  /** The container's last output lines, as its failure event carries them. */
  private lastLines(id: string): string[] {
    return this.ctx.state
      .containerLog(id)
      .slice(-CRASH_LOG_LINES)
      .map((l) => (l.length > CRASH_LOG_LINE_CHARS ? l.slice(0, CRASH_LOG_LINE_CHARS) : l));
  }

  /** What a stop's commit overwrote or left out, in the container's own log (`tern logs`), where its owner looks. */
  private reportStopCommits(id: string, t: Tracked, reports: Record<string, VolumeCommitAnswer>): void {
    for (const [volume, report] of Object.entries(reports)) {
      const said = [
        ...(report.overwritten.length
          ? [`overwrote files others changed since this container's base: ${report.overwritten.join(', ')}`]
          : []),
        ...(report.skipped.length ? [`left out ${report.skipped.join('; ')}`] : []),
      ];
      if (said.length) this.emitLine(id, t, 'stderr', `tern: commit of volume ${volume} on stop ${said.join('; ')}`, new Date());
    }
  }

  private async finish(id: string, t: Tracked, exit: ExitResult) {
    // Let the tail drain what the process wrote last before the container goes away.
    await Promise.race([t.logs, new Promise((r) => setTimeout(r, 2000))]);
    const expected = !!t.stopReason;
    const crashed = !expected && (exit.oomKilled || exit.exitCode !== 0);
    const how =
      (exit.oomKilled
        ? 'killed for using more memory than it was given'
        : exit.signal
          ? `killed by ${exit.signal}`
          : `exited with code ${exit.exitCode}`) + (t.notReady ? ` before it was ready (last ${t.notReady})` : '');
    const ended = { at: exit.finishedAt, untilSent: true };
    if (crashed && !t.failed) {
      const code = exit.exitCode !== null && !exit.signal ? { exitCode: exit.exitCode } : {};
      await this.publish(
        CONTAINER_FAILED,
        t.record,
        'failed',
        { phase: 'runtime', error: how, ...code, lastLines: this.lastLines(id) },
        ended,
      );
    }
    const reason = t.stopReason ?? (exit.oomKilled ? 'oom' : 'exited');
    // Before container.stopped: the gateway takes a commit only while the container is placed here.
    await this.commitSockets.close(id);
    await this.volumes
      .release(id)
      .then((reports) => this.reportStopCommits(id, t, reports))
      .catch((e: Error) => this.logger.error({ containerId: id }, `volumes of container ${id} not committed: ${e.message}`));
    await this.publish(
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
    this.invokes.serve(t.record.containerId, endpoint);
    if (pullsTasks(t.record.kind)) this.tasks.serve(t.record, endpoint);
  }

  private unserve(id: string) {
    this.invokes.drop(id);
    this.tasks.drop(id);
  }

  private requestStop(id: string, t: Tracked, reason: string, graceMs: number) {
    if (t.stopReason) return;
    t.stopReason = reason;
    this.unserve(id);
    this.setState(id, 'stopping');
    this.handle.runtime?.stop(id, graceMs).catch((e: Error) => this.logger.warn(`stopping container ${id} failed: ${e.message}`));
  }

  private untrack(id: string, state: ContainerRowState, extra: { endedAt?: number; exitCode?: number | null; detail?: string }) {
    this.unserve(id);
    this.tracked.delete(id);
    containersGauge.set(this.tracked.size);
    this.setState(id, state, extra);
    this.ctx.state.busyGpus = this.busyGpus();
  }

  /**
   * A container event, retried while NATS is away: metering and the scheduler must not miss one.
   * Events that end a container's usage (`untilSent`) are retried for as long as it takes, since
   * a lost one would leave the container accruing usage; the others give up after ten tries.
   * `at` is when it happened (a container's exit time, not when the report got out).
   */
  private async publish<T extends object>(
    contract: Contract<T>,
    record: ContainerRecord,
    name: string,
    fields: Omit<T, 'containerId' | 'deploymentId' | 'deploymentVersion' | 'workspaceId' | 'machineId' | 'at'>,
    opts: { at?: string; untilSent?: boolean } = {},
  ) {
    const payload = {
      containerId: record.containerId,
      deploymentId: record.deploymentId,
      deploymentVersion: record.deploymentVersion,
      workspaceId: record.workspaceId,
      machineId: this.machineId,
      at: opts.at ?? new Date().toISOString(),
      ...fields,
    } as unknown as T;
    for (let attempt = 1; ; attempt++) {
      try {
        await this.messaging.publish(contract, payload, { msgId: `${record.containerId}:${name}` });
        containerEventsTotal.inc({ event: name });
        return;
      } catch (e) {
        if (attempt % 10 === 0 || !opts.untilSent)
          this.logger.error(`could not publish ${contract.subject} for ${record.containerId} (${attempt} tries): ${(e as Error).message}`);
        if (attempt >= 10 && !opts.untilSent) return;
        await sleep(backoffMs(attempt, EVENT_RETRY_BACKOFF));
      }
    }
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
