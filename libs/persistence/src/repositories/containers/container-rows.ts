import type { ContainerState, DeploymentKind, VerificationState } from '#tern/contracts';
import type { ContainerResources } from '../../entities/container.entity.js';
import type { MachineGpu } from '../../entities/machine.entity.js';

/** What one lifecycle event says about a container's row (the scheduler's ContainerProgress). */
export interface ContainerProgressColumns {
  state: ContainerState;
  reason: string | null;
  requested?: ContainerResources;
  startedAt?: string;
  readyAt?: string;
  stoppedAt?: string;
  exitCode?: number | null;
  oomKilled?: boolean;
}

/** A deployment version the reconciler works on, with its deployment's kind and state. */
export interface VersionToReconcile {
  id: string;
  deploymentId: string;
  version: number;
  spec: unknown;
  desiredContainers: number;
  idleContainers: string[];
  placementReason: string | null;
  workspaceId: string;
  kind: DeploymentKind;
  deploymentState: string;
  /** Whether it is the deployment's latest version (older ones are superseded). */
  latest: boolean;
  /** Its crash loop (CrashLoopsRepository). */
  crashes: number;
  lastCrashAt: Date | null;
}

/** A container that was failed because its machine went offline or was removed. */
export interface LostContainer {
  id: string;
  machineId: string | null;
  stateReason: string;
  deploymentId: string;
  version: number;
  workspaceId: string;
}

/**
 * Where and for whom the scheduler placed a container, with what it reserved: what metering
 * charges, whatever a container event says.
 */
export interface ContainerPlacement {
  id: string;
  machineId: string | null;
  workspaceId: string;
  deploymentId: string;
  version: number;
  requested: ContainerResources;
  /** When the scheduler placed it: no usage before. */
  placedAt: Date;
}

/** A container with what its route needs from its version's spec. */
export interface RouteSource {
  id: string;
  machineId: string | null;
  state: string;
  readyAt: Date | null;
  deploymentId: string;
  version: number;
  spec: { workers?: number; concurrentRequests?: number };
}

/** A pool's machine as placement reads it (row-locked). */
export interface PlacementMachine {
  id: string;
  pool: string;
  state: string;
  cpuThreads: number | null;
  memoryBytes: number | null;
  gpus: MachineGpu[] | null;
  /** What its hardware challenge found (libs/proof). */
  verification: VerificationState;
}

/** A machine's generation: bumped whenever what placement reads of it changes. */
export interface MachineGeneration {
  id: string;
  generation: number;
}

/** What one container holds on its machine. */
export interface HeldResources {
  machineId: string;
  requested: Partial<ContainerResources>;
}

/** A scale command's fields, as DesiredState applies them. */
export interface DesiredContainers {
  deploymentId: string;
  deploymentVersion: number;
  desired: number;
  reason: string;
  issuedAt: string;
  idleContainers: string[];
}

/** A container row as placement inserts it. */
export interface ScheduledContainer {
  readonly id: string;
  readonly deploymentVersionId: string;
  readonly machineId: string;
  readonly reason: string;
  readonly requested: ContainerResources;
}

/** A container a machine says it runs (its heartbeat's word). */
export interface RunningContainer {
  machineId: string;
  containerId: string;
}
