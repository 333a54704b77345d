import type { ContainerStart, DeploymentKind, ResolvedSpec } from '#tern/contracts';
import type { PlacementRequest } from '#tern/placement';

/** Longest wait for a new container's first passing health check, unless its spec sets startup_timeout. */
export const STARTUP_TIMEOUT_SECONDS = 120;

/** What the version's spec asks of each container, for placement. */
export function placementRequest(spec: ResolvedSpec): PlacementRequest {
  return {
    cpuMillicores: spec.cpuMillicores,
    memoryBytes: spec.memoryBytes,
    gpuTypes: spec.gpuTypes ?? [],
    gpuCount: spec.gpuCount ?? 0,
    pool: spec.pool,
    ...(spec.image !== 'host' ? { image: spec.image } : {}),
    ...(spec.minReputation !== undefined && spec.minReputation !== null ? { minReputation: spec.minReputation } : {}),
    ...(spec.verifiedOnly ? { verified: true } : {}),
  };
}

/** Whether a stored spec is a resolved one (the gateway stores resolved specs; a bare row may not). */
export function isResolvedSpec(spec: unknown): spec is ResolvedSpec {
  const s = spec as Partial<ResolvedSpec> | null;
  return (
    !!s &&
    typeof s.cpuMillicores === 'number' &&
    typeof s.memoryBytes === 'number' &&
    typeof s.pool === 'string' &&
    typeof s.image === 'string'
  );
}

export interface StartTarget {
  containerId: string;
  deploymentId: string;
  deploymentVersion: number;
  workspaceId: string;
  kind: DeploymentKind;
  /** The GPU type placement matched, passed on so the agent picks GPUs of that type. */
  gpuType?: string;
}

/** The agent's order for one container of a version; ports are the runner's business. */
export function startCommand(spec: ResolvedSpec, t: StartTarget, now: Date): ContainerStart {
  return {
    containerId: t.containerId,
    deploymentId: t.deploymentId,
    deploymentVersion: t.deploymentVersion,
    workspaceId: t.workspaceId,
    deploymentKind: t.kind,
    image: spec.image,
    ...(spec.handler ? { handler: spec.handler } : {}),
    ...(spec.onStart ? { onStart: spec.onStart } : {}),
    ...(spec.code ? { code: spec.code } : {}),
    ...(spec.command ? { command: [...spec.command] } : {}),
    ...(spec.healthCheck ? { healthCheck: spec.healthCheck } : {}),
    ...(spec.loadProbe ? { loadProbe: { ...spec.loadProbe } } : {}),
    ...(spec.taskPolicy?.noRetryOn?.length ? { noRetryOn: [...spec.taskPolicy.noRetryOn] } : {}),
    env: { ...spec.env },
    ...(spec.secrets?.length ? { secrets: [...spec.secrets] } : {}),
    resources: {
      cpuMillicores: spec.cpuMillicores,
      memoryBytes: spec.memoryBytes,
      gpuCount: spec.gpuCount,
      ...(spec.gpuCount > 0 && t.gpuType ? { gpuType: t.gpuType } : {}),
    },
    volumes: spec.volumes.map((v) => ({ volume: v.name, mountPath: v.mountPath, readOnly: v.readOnly })),
    ports: [],
    ...(spec.network ? { network: 'block' in spec.network ? { block: true } : { allow: [...spec.network.allow] } } : {}),
    workers: spec.workers,
    concurrency: spec.concurrentRequests,
    startupTimeoutSeconds: spec.startupTimeoutSeconds ?? STARTUP_TIMEOUT_SECONDS,
    requestedAt: now.toISOString(),
  };
}

/** Requests a ready container may hold at once, as its route advertises. */
export function routeCapacity(spec: Pick<ResolvedSpec, 'workers' | 'concurrentRequests'>): number {
  return Math.max(1, (spec.workers ?? 1) * (spec.concurrentRequests ?? 1));
}
