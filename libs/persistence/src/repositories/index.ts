import { CodeBundlesRepository } from './code-bundles.repository.js';
import { ContainersRepository } from './containers.repository.js';
import { CrashLoopsRepository } from './crash-loops.repository.js';
import { DeploymentsRepository } from './deployments.repository.js';
import { MachineFaultsRepository } from './machine-faults.repository.js';
import { MachineVerificationRepository } from './machine-verification.repository.js';
import { MachinesRepository } from './machines.repository.js';
import { MapsRepository } from './maps.repository.js';
import { NatsUsersRepository } from './nats-users.repository.js';
import { ReputationRepository } from './reputation.repository.js';
import { SandboxesRepository } from './sandboxes.repository.js';
import { SchedulesRepository } from './schedules.repository.js';
import { SecretsRepository } from './secrets.repository.js';
import { TasksRepository } from './tasks.repository.js';
import { TokensRepository } from './tokens.repository.js';
import { UsageRepository } from './usage.repository.js';
import { VolumesRepository } from './volumes.repository.js';

export type {
  CallbackClaim,
  CancelledTask,
  EndedTask,
  NewTask,
  SettledAttempt,
  PendingSpotCheck,
  SpotCheckOfTask,
  StartedOver,
  TaskActivityRow,
  TaskListFilter,
  TaskWithDeployment,
  UnsentTask,
} from './tasks.repository.js';
export {
  ACTIVE_CONTAINER_STATES,
  type DeploymentContainer,
  type DeploymentWithCounts,
  type RequestMinute,
  type ScaleStep,
} from './deployments.repository.js';
export type { PoolMachineCount, PoolRules } from './machines.repository.js';
export type { NewApiToken } from './tokens.repository.js';
export type { NewNatsUser } from './nats-users.repository.js';

/** One per aggregate; PersistenceModule provides them all. */
export const REPOSITORIES = [
  CodeBundlesRepository,
  ContainersRepository,
  CrashLoopsRepository,
  DeploymentsRepository,
  MachineFaultsRepository,
  MachineVerificationRepository,
  MachinesRepository,
  MapsRepository,
  NatsUsersRepository,
  ReputationRepository,
  SandboxesRepository,
  SchedulesRepository,
  SecretsRepository,
  TasksRepository,
  TokensRepository,
  UsageRepository,
  VolumesRepository,
];

export {
  CodeBundlesRepository,
  ContainersRepository,
  CrashLoopsRepository,
  DeploymentsRepository,
  MachineFaultsRepository,
  MachineVerificationRepository,
  MachinesRepository,
  MapsRepository,
  NatsUsersRepository,
  ReputationRepository,
  SandboxesRepository,
  SchedulesRepository,
  SecretsRepository,
  TasksRepository,
  TokensRepository,
  UsageRepository,
  VolumesRepository,
};

// The view types repositories return and take.
export type * from './containers.repository.js';
export type * from './crash-loops.repository.js';
export type * from './machine-faults.repository.js';
export type * from './machine-verification.repository.js';
export type * from './machines.repository.js';
export type * from './maps.repository.js';
export { MAP_CHUNK_KEY, MAP_STATES } from './maps.repository.js';
export { OFFLINE_SWEEP_BATCH } from './machines.repository.js';
export type * from './reputation.repository.js';
export type * from './sandboxes.repository.js';
export type * from './schedules.repository.js';
export type * from './secrets.repository.js';
export type * from './usage.repository.js';
export type * from './volumes.repository.js';
