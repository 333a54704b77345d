import { type DeploymentKind, pullsTasks, SCALE_POLICIES, type ScalePolicy } from '../domain.js';
import type { ConcurrencyPolicy, DeploymentSpec, PredictivePolicy } from './deployment-spec.js';
import { isImageBuild } from './image-spec.js';
import { type ResolvedSchedule, resolveSchedule } from './schedule.js';
import { DEFAULT_MAX_PENDING_TASKS, DEFAULT_TASK_RETRIES, type ResolvedTaskPolicy } from './task-policy.js';

/** A deployment spec with every default filled and units made explicit: what services act on. */
export interface ResolvedSpec {
  readonly name: string;
  readonly kind: DeploymentKind;
  readonly image: string;
  readonly handler?: string;
  readonly onStart?: string;
  readonly command?: string[];
  /** When the spec sets one: seconds a new container may take to pass its readiness check (else the scheduler's 120). */
  readonly startupTimeoutSeconds?: number;
  /** command only, when not the default `/health`: the readiness check (ContainerStart.healthCheck). */
  readonly healthCheck?: string;
  readonly code?: string;
  readonly cpuMillicores: number;
  readonly memoryBytes: number;
  /** GPU types in order of preference; empty with gpuCount > 0 means any type. */
  readonly gpuTypes: string[];
  readonly gpuCount: number;
  readonly workers: number;
  readonly concurrentRequests: number;
  readonly keepWarmSeconds: number;
  /** An endpoint's: until its response starts (see idleTimeoutSeconds); a task's: all it may take. */
  readonly timeoutSeconds: number;
  /** endpoint only (absent on specs stored before it: see endpointLimits). */
  readonly idleTimeoutSeconds?: number;
  /** endpoint only (absent on specs stored before it: see endpointLimits). */
  readonly maxDurationSeconds?: number;
  readonly autoscaler: {
    readonly type: Exclude<ScalePolicy, 'fixed'>;
    readonly minContainers: number;
    readonly maxContainers: number;
    /** queue_depth, predictive: load one container should carry. */
    readonly tasksPerContainer: number;
    /** request_latency; predictive (default 10). */
    readonly desiredLatencySeconds?: number;
    /** predictive only (defaults 0.8, 60, 6, true). */
    readonly targetUtilization?: number;
    readonly stableWindowSeconds?: number;
    readonly panicWindowSeconds?: number;
    readonly prewarm?: boolean;
    /** concurrency only: in-flight requests one container should carry. */
    readonly targetConcurrency?: number;
    /** concurrency only, when the spec sets target_load: the server-reported load one container should carry. */
    readonly targetLoad?: number;
  };
  /** With target_load: where the agent reads each container's own load (ContainerStart.loadProbe). */
  readonly loadProbe?: { readonly path: string; readonly metric?: string };
  readonly env: Record<string, string>;
  /** Workspace secrets set as environment variables at each container's start (names only). */
  readonly secrets?: readonly string[];
  readonly volumes: { name: string; mountPath: string; readOnly: boolean }[];
  readonly pool: string;
  /** Absent: the public internet (see NetworkPolicy). */
  readonly network?: { readonly block: true } | { readonly allow: string[] };
  readonly minReputation?: number;
  /**
   * Only verified machines (libs/placement needsVerifiedMachine): set by the gateway at deploy,
   * which knows whether the image is private; absent on specs stored before trust tiers.
   */
  readonly verifiedOnly?: boolean;
  /** task_queue and function only (absent on specs stored before task queues). */
  readonly taskPolicy?: ResolvedTaskPolicy;
  /** function and task_queue only, when the spec has one. */
  readonly schedule?: ResolvedSchedule;
  /** function and task_queue only, when the spec asks for spot checks: the share of tasks checked. */
  readonly verify?: { readonly sample: number };
}

/** The spec's volumes: each mounted once, at its own path, which is a directory inside the container (not its root, no `..`). */
export function resolveVolumes(spec: Pick<DeploymentSpec, 'volumes'>): ResolvedSpec['volumes'] {
  const volumes = (spec.volumes ?? []).map((v) => ({
    name: v.name,
    mountPath: (v.path ?? v.mount_path)!.replace(/\/+$/, ''),
    readOnly: v.read_only === true || v.mode === 'ro',
  }));
  for (const [i, v] of volumes.entries()) {
    const field = `volumes[${i}]`;
    if (!v.mountPath) throw new SpecError(`${field}.path`, 'must be a directory inside the container, not its root (e.g. /models)');
    if (v.mountPath.split('/').some((s) => s === '..' || s === '.'))
      throw new SpecError(`${field}.path`, `must be written without "." or ".." segments (got ${v.mountPath})`);
    if (volumes.findIndex((o) => o.name === v.name) !== i)
      throw new SpecError(`${field}.name`, `mounts volume ${v.name} a second time: mount it once`);
    if (volumes.findIndex((o) => o.mountPath === v.mountPath) !== i)
      throw new SpecError(`${field}.path`, `is the mount path of another volume (${v.mountPath}): give each its own`);
  }
  return volumes;
}

/** A rule a spec breaks, named so the API can answer 400 with it. */
export class SpecError extends Error {
  constructor(
    readonly field: string,
    rule: string,
  ) {
    super(`${field} ${rule}`);
    this.name = 'SpecError';
  }
}

const UNITS: Record<string, number> = { '': 2 ** 20, ki: 2 ** 10, mi: 2 ** 20, gi: 2 ** 30, ti: 2 ** 40, k: 1e3, m: 1e6, g: 1e9, t: 1e12 };

/** "512Mi", "2Gi", "1.5G", or a number of MiB → bytes. */
export function parseMemory(value: string | number): number {
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || value <= 0) throw new SpecError('memory', 'must be a positive number of MiB or a size like 512Mi');
    return Math.round(value * 2 ** 20);
  }
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]i?)?b?\s*$/i.exec(String(value));
  if (!m) throw new SpecError('memory', `must be a size like 512Mi or 2Gi (got ${JSON.stringify(value)})`);
  const bytes = Math.round(Number(m[1]) * UNITS[(m[2] ?? '').toLowerCase()]);
  if (bytes < 16 * 2 ** 20) throw new SpecError('memory', 'must be at least 16Mi');
  return bytes;
}

const AUTOSCALER_TYPES = SCALE_POLICIES.filter((p) => p !== 'fixed');

/** The predictive policy's knobs with their defaults, and the rule that spans two of them. */
function predictiveKnobs(p: PredictivePolicy) {
  const stableWindowSeconds = p.stable_window ?? 60;
  const panicWindowSeconds = p.panic_window ?? 6;
  if (panicWindowSeconds > stableWindowSeconds)
    throw new SpecError('autoscaler.panic_window', `must not exceed stable_window (${stableWindowSeconds})`);
  return {
    desiredLatencySeconds: p.desired_latency ?? 10,
    targetUtilization: p.target_utilization ?? 0.8,
    stableWindowSeconds,
    panicWindowSeconds,
    prewarm: p.prewarm ?? true,
  };
}

/** The concurrency policy's target: soft, so never above what a container holds at once (more would wait in the gateway). */
function concurrencyKnobs(p: ConcurrencyPolicy, holds: number) {
  const targetConcurrency = p.target_concurrency ?? holds;
  if (targetConcurrency > holds)
    throw new SpecError(
      'autoscaler.target_concurrency',
      `must not exceed what one container holds at once, workers × concurrent_requests (${holds}): raise concurrent_requests or lower the target`,
    );
  if (p.target_load === undefined && (p.load_path !== undefined || p.load_metric !== undefined))
    throw new SpecError(
      p.load_path !== undefined ? 'autoscaler.load_path' : 'autoscaler.load_metric',
      'needs target_load: the load one container should carry',
    );
  return { targetConcurrency, ...(p.target_load !== undefined ? { targetLoad: p.target_load } : {}) };
}

/** Where the agent reads a container's own load, when the policy scales on it. */
function loadProbeOf(spec: DeploymentSpec): ResolvedSpec['loadProbe'] {
  const p = spec.autoscaler;
  if (p?.type !== 'concurrency' || p.target_load === undefined) return undefined;
  return { path: p.load_path ?? '/load', ...(p.load_metric ? { metric: p.load_metric } : {}) };
}

/** Defaults per kind: endpoints stay warm 180 s, task queues and functions 10 s (Beam's defaults). */
const KEEP_WARM: Record<DeploymentKind, number> = { endpoint: 180, task_queue: 10, function: 10, cron: 0 };
const TIMEOUT: Record<DeploymentKind, number> = { endpoint: 180, task_queue: 3600, function: 3600, cron: 3600 };

/** An endpoint's limits when its spec does not set them. */
export const ENDPOINT_IDLE_TIMEOUT_SECONDS = 60;
export const ENDPOINT_MAX_DURATION_SECONDS = 3600;

/**
 * An endpoint request's three limits, in ms: until its response starts (`timeout`), between two
 * pieces of a started response (`idle_timeout`), and in all (`max_duration`, never below the first).
 */
export function endpointLimits(spec: ResolvedSpec): { firstByteMs: number; idleMs: number; totalMs: number } {
  const firstByteMs = spec.timeoutSeconds * 1000;
  return {
    firstByteMs,
    idleMs: (spec.idleTimeoutSeconds ?? ENDPOINT_IDLE_TIMEOUT_SECONDS) * 1000,
    totalMs: Math.max(firstByteMs, (spec.maxDurationSeconds ?? ENDPOINT_MAX_DURATION_SECONDS) * 1000),
  };
}

function resolveTaskPolicy(spec: DeploymentSpec): ResolvedTaskPolicy {
  const p = spec.task_policy ?? {};
  return {
    maxRetries: p.max_retries ?? DEFAULT_TASK_RETRIES,
    timeoutSeconds: p.timeout ?? spec.timeout ?? TIMEOUT.task_queue,
    ...(p.ttl ? { ttlSeconds: p.ttl } : {}),
    maxPendingTasks: spec.max_pending_tasks ?? DEFAULT_MAX_PENDING_TASKS,
    ...(spec.callback_url ? { callbackUrl: spec.callback_url } : {}),
    ...(p.no_retry_on?.length ? { noRetryOn: [...new Set(p.no_retry_on)] } : {}),
  };
}

function checkedSchedule(spec: DeploymentSpec): ResolvedSchedule {
  try {
    return resolveSchedule(spec.schedule!);
  } catch (e) {
    const m = /^(schedule(?:\.\w+)?) ([\s\S]*)$/.exec((e as Error).message);
    throw m ? new SpecError(m[1], m[2]) : new SpecError('schedule', (e as Error).message);
  }
}

/** The spec's secrets, once each; none may share its name with an env entry or one Tern sets (PORT, TERN_*). */
function resolveSecrets(spec: DeploymentSpec): string[] {
  const secrets = [...new Set(spec.secrets ?? [])];
  for (const name of secrets) {
    if (spec.env && Object.prototype.hasOwnProperty.call(spec.env, name))
      throw new SpecError('secrets', `${name} is also set in env: give it one source`);
    if (name === 'PORT' || name.startsWith('TERN_')) throw new SpecError('secrets', `${name} is set by Tern itself: rename the secret`);
  }
  return secrets;
}

/** A command server's readiness check: a path or `tcp`; undefined for the default (GET /health). */
function resolveHealthCheck(spec: DeploymentSpec): string | undefined {
  for (const field of ['health_check', 'health_path'] as const) {
    if (spec[field] !== undefined && !spec.command)
      throw new SpecError(field, "applies to command servers (a handler's runner answers GET /health itself)");
  }
  if (spec.health_check === 'tcp') {
    if (spec.health_path !== undefined) throw new SpecError('health_path', 'applies to health_check http, not tcp');
    return 'tcp';
  }
  return spec.health_path !== undefined && spec.health_path !== '/health' ? spec.health_path : undefined;
}

/** Fields that apply to some kinds only: given to another kind, a SpecError. */
function checkKindFields(spec: DeploymentSpec): void {
  if (!pullsTasks(spec.kind)) {
    for (const field of ['task_policy', 'max_pending_tasks', 'callback_url', 'schedule'] as const) {
      if (spec[field] !== undefined)
        throw new SpecError(field, `applies to task_queue and function deployments only (this is a ${spec.kind})`);
    }
  }
  if (spec.kind !== 'endpoint') {
    for (const field of ['idle_timeout', 'max_duration'] as const) {
      if (spec[field] !== undefined) throw new SpecError(field, `applies to endpoint deployments only (this is a ${spec.kind})`);
    }
  }
}

/** `gpu` (a type, a list, or "any") and `gpu_count`, as placement reads them. */
function resolveGpus(spec: DeploymentSpec): { gpuTypes: string[]; gpuCount: number } {
  const gpuCount = spec.gpu_count ?? (spec.gpu ? 1 : 0);
  const gpuList = spec.gpu === undefined ? [] : Array.isArray(spec.gpu) ? spec.gpu : [spec.gpu];
  if (gpuList.some((g) => typeof g !== 'string' || !g.trim())) throw new SpecError('gpu', 'must be a GPU type, a list of types, or "any"');
  const gpuTypes = gpuList.map((g) => g.trim()).filter((g) => g.toLowerCase() !== 'any');
  if (gpuTypes.length && gpuCount === 0) throw new SpecError('gpu_count', 'must be at least 1 when gpu is set');
  return { gpuTypes, gpuCount };
}

/** Fills defaults and checks the rules that span fields. Throws SpecError. */
export function resolveSpec(spec: DeploymentSpec): ResolvedSpec {
  if (isImageBuild(spec.image))
    throw new SpecError(
      'image',
      'builds (base, apt, pip, npm, commands) are made by tern deploy or tern image build (POST /api/v1/images/builds, on a builder machine), then deployed by the reference the build answers: a deployment takes a registry reference, not a build',
    );
  if (spec.handler && spec.command) throw new SpecError('command', 'cannot be given together with handler: choose one');
  if (!spec.handler && !spec.command)
    throw new SpecError('handler', 'or command is required (handler: app.py:predict, or command: [...] serving $PORT)');
  if (spec.on_start && !spec.handler) throw new SpecError('on_start', 'needs a handler (a command serves itself)');
  const healthCheck = resolveHealthCheck(spec);
  const secrets = resolveSecrets(spec);
  checkKindFields(spec);
  if (spec.network?.block && spec.network.allow) throw new SpecError('network', 'takes block or allow, not both');
  if (spec.handler && !spec.code) throw new SpecError('code', "is required with a handler (tern deploy uploads the spec's folder)");
  const { gpuTypes, gpuCount } = resolveGpus(spec);
  const workers = spec.workers ?? 1;
  const concurrentRequests = spec.concurrent_requests ?? 1;
  const policy = spec.autoscaler;
  const minContainers = policy?.min_containers ?? 0;
  const maxContainers = policy?.max_containers ?? 1;
  if (minContainers > maxContainers) throw new SpecError('autoscaler.min_containers', `must not exceed max_containers (${maxContainers})`);
  if (policy && !(AUTOSCALER_TYPES as readonly string[]).includes(policy.type))
    throw new SpecError('autoscaler.type', `must be one of ${AUTOSCALER_TYPES.join(', ')}`);
  return {
    name: spec.name,
    kind: spec.kind,
    image: (spec.image as string | undefined) ?? 'host',
    handler: spec.handler,
    onStart: spec.on_start,
    command: spec.command,
    ...(healthCheck ? { healthCheck } : {}),
    ...(spec.startup_timeout ? { startupTimeoutSeconds: spec.startup_timeout } : {}),
    code: spec.code,
    cpuMillicores: Math.round((spec.cpu ?? 1) * 1000),
    memoryBytes: parseMemory(spec.memory ?? '512Mi'),
    gpuTypes,
    gpuCount,
    workers,
    concurrentRequests,
    keepWarmSeconds: spec.keep_warm_seconds ?? KEEP_WARM[spec.kind],
    timeoutSeconds: spec.timeout ?? TIMEOUT[spec.kind],
    ...(spec.kind === 'endpoint'
      ? {
          idleTimeoutSeconds: spec.idle_timeout ?? ENDPOINT_IDLE_TIMEOUT_SECONDS,
          maxDurationSeconds: spec.max_duration ?? ENDPOINT_MAX_DURATION_SECONDS,
        }
      : {}),
    autoscaler: {
      type: policy?.type ?? 'queue_depth',
      minContainers,
      maxContainers,
      tasksPerContainer:
        (policy?.type === 'queue_depth' || policy?.type === 'predictive' ? policy.tasks_per_container : undefined) ??
        workers * concurrentRequests,
      desiredLatencySeconds: policy?.type === 'request_latency' || policy?.type === 'predictive' ? policy.desired_latency : undefined,
      ...(policy?.type === 'predictive' ? predictiveKnobs(policy) : {}),
      ...(policy?.type === 'concurrency' ? concurrencyKnobs(policy, workers * concurrentRequests) : {}),
    },
    ...(loadProbeOf(spec) ? { loadProbe: loadProbeOf(spec) } : {}),
    env: spec.env ?? {},
    ...(secrets.length ? { secrets } : {}),
    volumes: resolveVolumes(spec),
    pool: spec.pool ?? 'default',
    ...(spec.network?.block ? { network: { block: true } } : spec.network?.allow ? { network: { allow: [...spec.network.allow] } } : {}),
    minReputation: stricter(spec.min_reputation, spec.placement?.min_reputation),
    ...(pullsTasks(spec.kind) ? { taskPolicy: resolveTaskPolicy(spec) } : {}),
    ...(spec.schedule ? { schedule: checkedSchedule(spec) } : {}),
    ...(spec.verify ? { verify: checkedVerify(spec) } : {}),
  };
}

function stricter(a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined ? b : b === undefined ? a : Math.max(a, b);
}

/** Spot checks compare task results: only kinds that run tasks have any. */
function checkedVerify(spec: DeploymentSpec): { sample: number } {
  if (!pullsTasks(spec.kind))
    throw new SpecError('verify', `checks task results: only task_queue and function deployments have them (this is ${spec.kind})`);
  return { sample: spec.verify!.sample };
}
