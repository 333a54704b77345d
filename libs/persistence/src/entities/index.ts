import { ApiToken } from './api-token.entity.js';
import { CodeBundle } from './code-bundle.entity.js';
import { Container } from './container.entity.js';
import { DeploymentVersion } from './deployment-version.entity.js';
import { Deployment } from './deployment.entity.js';
import { Machine } from './machine.entity.js';
import { MeteredContainer } from './metered-container.entity.js';
import { MeteredTask } from './metered-task.entity.js';
import { NatsUser } from './nats-user.entity.js';
import { Pool } from './pool.entity.js';
import { ReputationScore } from './reputation-score.entity.js';
import { ReputationMachine } from './reputation-machine.entity.js';
import { Sandbox } from './sandbox.entity.js';
import { Task } from './task.entity.js';
import { UsageInterval } from './usage-interval.entity.js';
import { Volume, VolumeChunk, VolumeFile } from './volume.entity.js';
import { Workspace } from './workspace.entity.js';
import { WorkspaceSecret } from './workspace-secret.entity.js';

export * from './api-token.entity.js';
export * from './code-bundle.entity.js';
export * from './container.entity.js';
export * from './deployment-version.entity.js';
export * from './deployment.entity.js';
export * from './machine.entity.js';
export * from './metered-container.entity.js';
export * from './metered-task.entity.js';
export * from './nats-user.entity.js';
export * from './pool.entity.js';
export * from './reputation-score.entity.js';
export * from './reputation-machine.entity.js';
export * from './sandbox.entity.js';
export * from './task.entity.js';
export * from './usage-interval.entity.js';
export * from './volume.entity.js';
export * from './workspace.entity.js';
export * from './workspace-secret.entity.js';

/** Listed by hand: globs and ESM do not mix, and a list shows what the DataSource knows. */
export const ENTITIES = [
  Workspace,
  ApiToken,
  CodeBundle,
  Pool,
  Machine,
  Deployment,
  DeploymentVersion,
  Container,
  Task,
  UsageInterval,
  ReputationScore,
  MeteredContainer,
  MeteredTask,
  ReputationMachine,
  NatsUser,
  Sandbox,
  Volume,
  VolumeFile,
  VolumeChunk,
  WorkspaceSecret,
] as const;
