import type { DeploymentKind, DeploymentSpec, DeploymentState, ResolvedSpec } from '#tern/contracts';

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
  createdAt: string;
}

export interface ContainerView {
  id: string;
  version: number;
  machineId: string | null;
  state: string;
  reason: string | null;
  readyAt: string | null;
}

export interface DeploymentDetail extends DeploymentSummary {
  deploymentId: string;
  spec: ResolvedSpec;
  submitted?: DeploymentSpec;
  versions: VersionView[];
  containers: ContainerView[];
}

export interface DeployResult {
  name: string;
  version: number;
  deploymentId: string;
  url: string;
  spec: ResolvedSpec;
}

/** Where a deployment is called: `/taskqueue/<name>` takes a task queue's tasks, `/endpoint/<name>` anything else. */
export function deploymentUrl(base: string, name: string, kind: string): string {
  return `${base}/${kind === 'task_queue' ? 'taskqueue' : 'endpoint'}/${name}`;
}
