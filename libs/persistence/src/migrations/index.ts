import { Initial1763780000000 } from './1763780000000-initial.js';
import { MachineRegistry1763900000000 } from './1763900000000-machine-registry.js';
import { ScaleTargets1764000000000 } from './1764000000000-scale-targets.js';
import { Placement1764100000000 } from './1764100000000-placement.js';
import { TaskQueues1764200000000 } from './1764200000000-task-queues.js';
import { Metering1764300000000 } from './1764300000000-metering.js';
import { Reputation1764400000000 } from './1764400000000-reputation.js';
import { CallbackError1764500000000 } from './1764500000000-callback-error.js';
import { OperatorRole1764600000000 } from './1764600000000-operator-role.js';
import { CodeBundles1764700000000 } from './1764700000000-code-bundles.js';
import { TokenExpiry1764840000000 } from './1764840000000-token-expiry.js';
import { MachineNatsKey1764900000000 } from './1764900000000-machine-nats-key.js';
import { ScaleEvents1764990000000 } from './1764990000000-scale-events.js';
import { MachineStateChanges1764991000000 } from './1764991000000-machine-state-changes.js';
import { EndpointRequestMinutes1764992000000 } from './1764992000000-endpoint-request-minutes.js';
import { NatsUsers1765000000000 } from './1765000000000-nats-users.js';
import { Sandboxes1765010000000 } from './1765010000000-sandboxes.js';
import { Volumes1765020000000 } from './1765020000000-volumes.js';
import { FunctionMaps1765100000000 } from './1765100000000-function-maps.js';
import { ScheduleTicks1765200000000 } from './1765200000000-schedule-ticks.js';
import { WorkspaceSecrets1765310000000 } from './1765310000000-workspace-secrets.js';
import { SandboxPublicPorts1765320000000 } from './1765320000000-sandbox-public-ports.js';
import { ReputationHeartbeats1765360000000 } from './1765360000000-reputation-heartbeats.js';
import { MachineStateOutbox1765370000000 } from './1765370000000-machine-state-outbox.js';
import { MachineGenerations1765420000000 } from './1765420000000-machine-generations.js';
import { MachineFaults1765436000000 } from './1765436000000-machine-faults.js';
import { CrashLoops1765450000000 } from './1765450000000-crash-loops.js';
import { MachineVerification1765500000000 } from './1765500000000-machine-verification.js';
import { TaskSpotChecks1765600000000 } from './1765600000000-task-spot-checks.js';
import { PendingSpotChecks1765640000000 } from './1765640000000-pending-spot-checks.js';
import { WorkspaceDeletes1765641000000 } from './1765641000000-workspace-deletes.js';
import { WorkspacePurges1765642000000 } from './1765642000000-workspace-purges.js';
import { HeartbeatHotUpdates1765700000000 } from './1765700000000-heartbeat-hot-updates.js';

/** In order of their timestamps. Listed by hand for the same reason as ENTITIES. */
export const MIGRATIONS = [
  Initial1763780000000,
  MachineRegistry1763900000000,
  ScaleTargets1764000000000,
  Placement1764100000000,
  TaskQueues1764200000000,
  Metering1764300000000,
  Reputation1764400000000,
  CallbackError1764500000000,
  OperatorRole1764600000000,
  CodeBundles1764700000000,
  TokenExpiry1764840000000,
  MachineNatsKey1764900000000,
  ScaleEvents1764990000000,
  MachineStateChanges1764991000000,
  EndpointRequestMinutes1764992000000,
  NatsUsers1765000000000,
  Sandboxes1765010000000,
  Volumes1765020000000,
  FunctionMaps1765100000000,
  ScheduleTicks1765200000000,
  WorkspaceSecrets1765310000000,
  SandboxPublicPorts1765320000000,
  ReputationHeartbeats1765360000000,
  MachineStateOutbox1765370000000,
  MachineGenerations1765420000000,
  MachineFaults1765436000000,
  CrashLoops1765450000000,
  MachineVerification1765500000000,
  TaskSpotChecks1765600000000,
  PendingSpotChecks1765640000000,
  WorkspaceDeletes1765641000000,
  WorkspacePurges1765642000000,
  HeartbeatHotUpdates1765700000000,
] as const;
