import { type ContainerStart, type GpuInventory, gpuTypeMatches } from '#tern/contracts';
import { type ContainerSpec, type HostBind } from '#tern/runtime';

/**
 * The labels a Tern container carries in the runtime, so that after an agent restart the
 * container can be recognised (is it ours? this machine's?) and reported on again without any
 * other record: the runtime keeps them with the container.
 */
export const LABEL = {
  container: 'tern.container',
  machine: 'tern.machine',
  deployment: 'tern.deployment',
  version: 'tern.deployment-version',
  workspace: 'tern.workspace',
  kind: 'tern.kind',
  /** Comma-separated `vendor:index` of the GPUs it holds. */
  gpus: 'tern.gpus',
  cpuMillicores: 'tern.cpu-millicores',
  memoryBytes: 'tern.memory-bytes',
  requestedAt: 'tern.requested-at',
  /** Worker processes × requests each: how many tasks it runs at once. */
  workers: 'tern.workers',
  concurrency: 'tern.concurrency',
  /** The readiness check when not GET /health (ContainerStart.healthCheck), so an adopted container is checked the same way. */
  healthCheck: 'tern.health-check',
  /** Comma-separated error type names whose task failures are not retried (ContainerStart.noRetryOn). */
  noRetryOn: 'tern.no-retry-on',
  /** Where its load is read for the autoscaler (ContainerStart.loadProbe), so an adopted container reports it too. */
  loadPath: 'tern.load-path',
  loadMetric: 'tern.load-metric',
} as const;

/** What the agent knows of one of its containers, from the start command or from its labels. */
export interface ContainerRecord {
  containerId: string;
  deploymentId: string;
  deploymentVersion: number;
  workspaceId: string;
  kind: string;
  gpus: string[];
  cpuMillicores: number;
  memoryBytes: number;
  requestedAt: string;
  workers: number;
  concurrency: number;
  healthCheck?: string;
  noRetryOn?: string[];
  loadProbe?: { path: string; metric?: string };
}

/**
 * Processes and threads one container may hold at once (the cgroup's pids limit): a fork bomb
 * ends inside its own container instead of exhausting the machine's process table for the
 * agent and its neighbours. Generous for runners with many workers and threads.
 */
export const CONTAINER_PIDS_LIMIT = 1024;

export function gpuKey(g: Pick<GpuInventory, 'vendor' | 'index'>): string {
  return `${g.vendor}:${g.index}`;
}

/** Where the agent's own directories appear inside a container. */
export const APP_DIR = '/app';
export const RUNNERS_MOUNT = '/tern/runners';
/** Where the Python SDK sits in a container, so a handler's `import tern` (its decorators, tern.volume) works in any image. */
export const PYTHON_SDK_MOUNT = '/tern/sdk/python';
/** Where a container finds its agent socket (CommitSockets; bound read-only: connecting needs no write). */
export const AGENT_SOCKET_MOUNT = '/tern/agent';
export const AGENT_SOCKET_NAME = 'agent.sock';

/** Host directories the agent binds into a container: the code bundle and Tern's runners. */
export interface AgentMounts {
  /** The extracted code bundle, bound read-only at /app (also the working directory). */
  codeDir?: string;
  /** The repository's `runners/`, bound read-only at /tern/runners when a handler runs. */
  runnersDir?: string;
  /** The repository's `sdk/python`, bound read-only at PYTHON_SDK_MOUNT when a Python handler runs (the runner puts it on sys.path). */
  pythonSdkDir?: string;
  /** Volumes materialized from the gateway (VolumeMounts), by volume name. */
  volumeDirs?: Record<string, string>;
  /** The directory of the container's agent socket (CommitSockets), bound at AGENT_SOCKET_MOUNT. */
  agentSocketDir?: string;
}

/**
 * The runner process for a handler, by the handler's file: `.js`/`.mjs`/`.cjs` run in the Node
 * runner, anything else (`app.py:predict`, `pkg.app:predict`) in the Python one.
 */
export function runnerArgs(handler: string): string[] {
  const file = handler.slice(0, handler.lastIndexOf(':') > 0 ? handler.lastIndexOf(':') : undefined);
  return /\.[cm]?js$/.test(file)
    ? ['node', `${RUNNERS_MOUNT}/node/tern-runner.mjs`]
    : ['python3', `${RUNNERS_MOUNT}/python/tern_runner.py`];
}

/** Runtime ids are stricter than contract ids: they must start with a letter or digit. */
export const RUNTIME_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

/**
 * The runtime spec for a start command. With the `private` network (the agent's default) the
 * container has its own namespace and address on the agent's bridge, listens on $PORT there,
 * and may reach what the command's `network` allows; with `host` (an operator's setting) the
 * runtime picks a free port on the machine and the agent health-checks it on loopback.
 * Volumes are the directories VolumeMounts materialized from the gateway.
 */
export function toContainerSpec(
  cmd: ContainerStart,
  machineId: string,
  gpus: GpuInventory[],
  mounts: AgentMounts = {},
  network: 'private' | 'host' = 'private',
): ContainerSpec {
  const env: Record<string, string> = {
    ...cmd.env,
    TERN_DEPLOYMENT_ID: cmd.deploymentId,
    TERN_DEPLOYMENT_VERSION: String(cmd.deploymentVersion),
    TERN_WORKSPACE_ID: cmd.workspaceId,
    TERN_MACHINE_ID: machineId,
    TERN_WORKERS: String(cmd.workers),
    TERN_CONCURRENCY: String(cmd.concurrency),
    // A task_queue runner ends the worker whose task's connection closes (cancel, timeout).
    TERN_DEPLOYMENT_KIND: cmd.deploymentKind,
  };
  if (cmd.handler) env.TERN_HANDLER = cmd.handler;
  if (cmd.onStart) env.TERN_ON_START = cmd.onStart;
  if (gpus.length) env.TERN_GPU_COUNT = String(gpus.length);
  // A handler with no command of its own runs in Tern's runner for its language.
  const runner = cmd.handler && !cmd.command?.length && mounts.runnersDir;
  const args = [...(runner ? runnerArgs(cmd.handler!) : (cmd.command ?? [])), ...(cmd.args ?? [])];
  const binds: HostBind[] = [];
  if (mounts.codeDir) binds.push({ hostPath: mounts.codeDir, containerPath: APP_DIR });
  if (runner) binds.push({ hostPath: mounts.runnersDir!, containerPath: RUNNERS_MOUNT });
  if (runner && mounts.pythonSdkDir && args[0] === 'python3')
    binds.push({ hostPath: mounts.pythonSdkDir, containerPath: PYTHON_SDK_MOUNT });
  if (mounts.agentSocketDir) {
    binds.push({ hostPath: mounts.agentSocketDir, containerPath: AGENT_SOCKET_MOUNT });
    env.TERN_AGENT_SOCKET = `${AGENT_SOCKET_MOUNT}/${AGENT_SOCKET_NAME}`;
  }
  const cwd = cmd.cwd ?? (mounts.codeDir || runner ? APP_DIR : undefined);
  const labels: Record<string, string> = {
    [LABEL.container]: cmd.containerId,
    [LABEL.machine]: machineId,
    [LABEL.deployment]: cmd.deploymentId,
    [LABEL.version]: String(cmd.deploymentVersion),
    [LABEL.workspace]: cmd.workspaceId,
    [LABEL.kind]: cmd.deploymentKind,
    [LABEL.gpus]: gpus.map(gpuKey).join(','),
    [LABEL.cpuMillicores]: String(cmd.resources.cpuMillicores),
    [LABEL.memoryBytes]: String(cmd.resources.memoryBytes),
    [LABEL.requestedAt]: cmd.requestedAt,
    [LABEL.workers]: String(cmd.workers),
    [LABEL.concurrency]: String(cmd.concurrency),
    ...(cmd.healthCheck ? { [LABEL.healthCheck]: cmd.healthCheck } : {}),
    ...(cmd.noRetryOn?.length ? { [LABEL.noRetryOn]: cmd.noRetryOn.join(',') } : {}),
    ...(cmd.loadProbe ? { [LABEL.loadPath]: cmd.loadProbe.path } : {}),
    ...(cmd.loadProbe?.metric ? { [LABEL.loadMetric]: cmd.loadProbe.metric } : {}),
  };
  return {
    id: cmd.containerId,
    image: cmd.image,
    ...(args.length ? { args } : {}),
    env,
    ...(cwd ? { cwd } : {}),
    memoryBytes: cmd.resources.memoryBytes,
    cpuMillicores: cmd.resources.cpuMillicores,
    pidsLimit: CONTAINER_PIDS_LIMIT,
    volumes: cmd.volumes.map((v) => ({
      name: `${cmd.workspaceId}/${v.volume}`,
      containerPath: v.mountPath,
      readOnly: v.readOnly,
      ...(mounts.volumeDirs?.[v.volume] ? { hostPath: mounts.volumeDirs[v.volume] } : {}),
    })),
    ...(binds.length ? { binds } : {}),
    ...gpuDevices(gpus),
    network,
    ...(network === 'private'
      ? { egress: cmd.network?.block ? { block: true } : cmd.network?.allow ? { allow: [...cmd.network.allow] } : {} }
      : {}),
    labels,
  };
}

/** The runtime's `gpus` for the GPUs a container (or a sandbox's container) holds: nothing when none. */
export function gpuDevices(gpus: readonly GpuInventory[]): Pick<ContainerSpec, 'gpus'> {
  return gpus.length ? { gpus: { devices: gpus.map((g) => ({ index: g.index, ...(g.uuid ? { uuid: g.uuid } : {}) })) } } : {};
}

export function recordFromStart(cmd: ContainerStart, gpus: GpuInventory[]): ContainerRecord {
  return {
    containerId: cmd.containerId,
    deploymentId: cmd.deploymentId,
    deploymentVersion: cmd.deploymentVersion,
    workspaceId: cmd.workspaceId,
    kind: cmd.deploymentKind,
    gpus: gpus.map(gpuKey),
    cpuMillicores: cmd.resources.cpuMillicores,
    memoryBytes: cmd.resources.memoryBytes,
    requestedAt: cmd.requestedAt,
    workers: cmd.workers,
    concurrency: cmd.concurrency,
    ...(cmd.healthCheck ? { healthCheck: cmd.healthCheck } : {}),
    ...(cmd.noRetryOn?.length ? { noRetryOn: [...cmd.noRetryOn] } : {}),
    ...(cmd.loadProbe ? { loadProbe: { ...cmd.loadProbe } } : {}),
  };
}

/**
 * The record of a container found in the runtime, if it is one this agent started for this
 * machine; undefined for anything else (which reconciliation then kills).
 */
export function recordFromLabels(id: string, labels: Record<string, string>, machineId: string): ContainerRecord | undefined {
  if (labels[LABEL.container] !== id || labels[LABEL.machine] !== machineId) return undefined;
  const version = Number(labels[LABEL.version]);
  if (!labels[LABEL.deployment] || !labels[LABEL.workspace] || !Number.isInteger(version) || version < 1) return undefined;
  return {
    containerId: id,
    deploymentId: labels[LABEL.deployment],
    deploymentVersion: version,
    workspaceId: labels[LABEL.workspace],
    kind: labels[LABEL.kind] ?? 'endpoint',
    gpus: (labels[LABEL.gpus] ?? '').split(',').filter(Boolean),
    cpuMillicores: Number(labels[LABEL.cpuMillicores]) || 1,
    memoryBytes: Number(labels[LABEL.memoryBytes]) || 1,
    requestedAt: labels[LABEL.requestedAt] ?? new Date(0).toISOString(),
    workers: Number(labels[LABEL.workers]) || 1,
    concurrency: Number(labels[LABEL.concurrency]) || 1,
    ...(labels[LABEL.healthCheck] ? { healthCheck: labels[LABEL.healthCheck] } : {}),
    ...(labels[LABEL.noRetryOn] ? { noRetryOn: labels[LABEL.noRetryOn].split(',') } : {}),
    ...(labels[LABEL.loadPath]
      ? { loadProbe: { path: labels[LABEL.loadPath], ...(labels[LABEL.loadMetric] ? { metric: labels[LABEL.loadMetric] } : {}) } }
      : {}),
  };
}

/** Picks `count` free GPUs (of `type` when given), lowest index first; a reason when it cannot. */
export function allocateGpus(
  gpus: readonly GpuInventory[],
  busy: ReadonlySet<string>,
  count: number,
  type?: string,
): { ok: true; gpus: GpuInventory[] } | { ok: false; reason: string } {
  if (count === 0) return { ok: true, gpus: [] };
  const fitting = gpus.filter((g) => !type || gpuTypeMatches(g.model, type));
  const free = fitting.filter((g) => !busy.has(gpuKey(g)));
  if (free.length >= count) return { ok: true, gpus: free.slice(0, count) };
  const what = type ? `${type} GPU(s)` : 'GPU(s)';
  return { ok: false, reason: `needs ${count} ${what}; this machine has ${fitting.length}, ${free.length} free` };
}
