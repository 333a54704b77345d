import { CodeBundlesRepository } from './code-bundles.repository.js';
import { ContainersRepository } from './containers.repository.js';
import { DeploymentsRepository } from './deployments.repository.js';
import { MachinesRepository } from './machines.repository.js';
import { MapsRepository } from './maps.repository.js';
import { ReputationRepository } from './reputation.repository.js';
import { SchedulesRepository } from './schedules.repository.js';
import { TasksRepository } from './tasks.repository.js';
import { TokensRepository } from './tokens.repository.js';
import { UsageRepository } from './usage.repository.js';

export type {
  CallbackClaim,
  CancelledTask,
  EndedTask,
  LeaseClaim,
  NewTask,
  StartedOver,
  TaskLease,
  TaskListFilter,
  TaskWithDeployment,
  UnsentTask,
} from './tasks.repository.js';
export { ACTIVE_CONTAINER_STATES, type DeploymentContainer, type DeploymentWithCounts } from './deployments.repository.js';
export type { PoolMachineCount, PoolRules } from './machines.repository.js';
export type { NewApiToken } from './tokens.repository.js';

/** One per aggregate; PersistenceModule provides them all. */
export const REPOSITORIES = [
  CodeBundlesRepository,
  ContainersRepository,
  DeploymentsRepository,
  MachinesRepository,
  MapsRepository,
  ReputationRepository,
  SchedulesRepository,
  TasksRepository,
  TokensRepository,
  UsageRepository,
];

export {
  CodeBundlesRepository,
  ContainersRepository,
  DeploymentsRepository,
  MachinesRepository,
  MapsRepository,
  ReputationRepository,
  SchedulesRepository,
  TasksRepository,
  TokensRepository,
  UsageRepository,
};

// The view types repositories return and take.
export type * from './containers.repository.js';
export type * from './machines.repository.js';
export type * from './maps.repository.js';
export { MAP_CHUNK_KEY, MAP_STATES } from './maps.repository.js';
export type * from './reputation.repository.js';
export type * from './schedules.repository.js';
export type * from './usage.repository.js';
