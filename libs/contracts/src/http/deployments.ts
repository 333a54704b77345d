import type { DeploymentSpec } from '../deployment/deployment-spec.js';
import type { ResolvedSpec } from '../deployment/resolved-spec.js';
import type { DeploymentKind, DeploymentState } from '../domain.js';

/** One row of `GET /api/v1/deployments`. */
export interface DeploymentSummary {
  name: string;
  kind: DeploymentKind;
  version: number;
  state: DeploymentState;
  /** Summed over versions: an older version may still be winding down. */
  desired: number;
  actual: number;
  /** Why desired is not met (the latest version's placement reason), else the deployment's state reason. */
  reason: string | null;
  url: string;
  updatedAt: string;
}

export interface VersionView {
  version: number;
  latest: boolean;
  desired: number;
  actual: number;
  desiredReason: string | null;
  placementReason: string | null;
  /** Set while the version's containers crash in a row: the scheduler waits longer before each next start. */
  crashLoop: CrashLoopView | null;
  createdAt: string;
}

/** A version in a crash loop: how often, when it may start again, and what its last crash said. */
export interface CrashLoopView {
  state: 'CrashLoopBackOff';
  /** Containers that crashed in a row. */
  crashes: number;
  lastCrashAt: string;
  /** When the scheduler starts the next container (past: it may already have). */
  nextStartAt: string;
  /** The last crash: where (runtime, health, start, image), how, its exit code, its last output lines. */
  phase: string;
  error: string;
  exitCode: number | null;
  lastLines: string[];
}

export interface ContainerView {
  id: string;
  version: number;
  machineId: string | null;
  state: string;
  reason: string | null;
  readyAt: string | null;
}

/** `GET /api/v1/deployments/<name>`, and the answer of `POST …/stop` and `…/start`. */
export interface DeploymentDetail extends DeploymentSummary {
  deploymentId: string;
  spec: ResolvedSpec;
  submitted?: DeploymentSpec;
  versions: VersionView[];
  containers: ContainerView[];
}

/** `POST /api/v1/deployments` (body: a `DeploymentSpec`): the new version. */
export interface DeployResult {
  name: string;
  version: number;
  deploymentId: string;
  url: string;
  spec: ResolvedSpec;
}

/**
 * `GET /api/v1/deployments/<name>/logs` answers server-sent events: first `event: info` with
 * this, then `event: line` with a `ContainerLogLine` each.
 */
export interface DeploymentLogsInfo {
  deployment: string;
  containers: string[];
  follow: boolean;
  /** Past lines are not stored centrally: only lines written while following arrive. */
  stored: false;
}

/** A change of a version's desired container count, as the autoscaler decided it. */
export interface ScaleEventView {
  at: string;
  version: number;
  desired: number;
  previous: number;
  reason: string | null;
}

/** `GET /api/v1/deployments/<name>/scale-events[?minutes=]`: desired vs ready containers over the window. */
export interface ScaleHistory {
  deployment: string;
  from: string;
  to: string;
  /** Oldest first. */
  events: ScaleEventView[];
  /** A point at `from`, at every change and at `to`: desired summed over versions, containers ready. */
  series: { at: string; desired: number; ready: number }[];
}

/** `GET /api/v1/deployments/<name>/requests[?minutes=]`: endpoint requests per minute, every version and gateway summed. */
export interface RequestHistory {
  deployment: string;
  from: string;
  to: string;
  /** Oldest first, one point per minute, zeros included. */
  series: {
    at: string;
    requests: number;
    /** Answered 5xx. */
    errors: number;
    /** Seconds from arrival to response, interpolated in latency buckets; null without requests. */
    p50: number | null;
    p95: number | null;
    p99: number | null;
  }[];
}
