import type { MachineState, VerificationState } from '../domain.js';
import type { ReputationStanding } from '../buckets.js';

export interface GpuView {
  index: number;
  model: string;
  memoryMiB: number;
  vendor?: string;
  driverVersion?: string;
  cudaVersion?: string;
  uuid?: string;
  /** From the last heartbeat; absent when none is recent. */
  state?: 'free' | 'busy';
}

export interface NetworkView {
  /** The slower of the two legs: what pool minimums are compared with. */
  throughputMbps: number;
  natsMbps: number;
  httpMbps: number;
  latencyMs: number;
  error?: string;
  testedAt: string;
}

/** A machine's reputation: score and components, each 0 to 1. */
export interface ReputationView {
  /** 0 (unreliable) to 1; compared with min_reputation by placement. */
  score: number;
  /** The inputs, each 0 to 1 (see docs/architecture.md, Reputation). */
  components: Record<string, number>;
  /** Starts and task attempts the control plane saw end on the machine (decayed); 0 in history rows stored before it was kept. */
  observed: number;
  /** `unproven` until enough of its work was observed (the score is then mostly the prior's guess), then `proven`. */
  standing: ReputationStanding;
  computedAt: string;
}

/** One row of `GET /api/v1/machines`. */
export interface MachineSummary {
  id: string;
  pool: string;
  state: MachineState;
  stateReason: string | null;
  stateChangedAt: string;
  hostname: string | null;
  /** usagePercent comes from the last heartbeat and is null when none is recent. */
  cpu: { model: string | null; cores: number | null; threads: number | null; usagePercent: number | null };
  memory: { totalBytes: number | null; usagePercent: number | null };
  gpus: GpuView[];
  /** The latest network test; null until the agent has reported one. */
  network: NetworkView | null;
  lastHeartbeatAt: string | null;
  /** Containers running on it, as its last heartbeat said; null when none is recent. */
  runningContainers: number | null;
  agentVersion: string | null;
  registeredAt: string | null;
  /** The current reputation score and its components; null until the reputation service has scored it. */
  reputation: ReputationView | null;
  /** What the control plane's hardware challenges found (libs/proof): quarantined machines get nothing. */
  verification: VerificationView;
}

export interface VerificationView {
  state: VerificationState;
  /** What was proven, or what failed (names the device and the figure), or why none was run yet. */
  reason: string | null;
  /** When the last challenge ended; null before the first. */
  checkedAt: string | null;
}

export interface MachineOsView {
  platform: string;
  distro: string;
  release: string;
  kernel: string;
  arch: string;
}

export interface MachineDiskView {
  mount: string;
  fsType: string;
  sizeBytes: number;
  freeBytes: number;
}

export interface MachineNetworkInterfaceView {
  name: string;
  mac?: string;
  addresses: string[];
  speedMbps: number | null;
}

/** `GET /api/v1/machines/<id>`. */
export interface MachineDetail extends MachineSummary {
  os: MachineOsView | null;
  disks: MachineDiskView[];
  networkInterfaces: MachineNetworkInterfaceView[];
  joinToken: { expiresAt: string | null; usedAt: string | null } | null;
  heartbeat: {
    sentAt: string;
    receivedAt: string;
    sequence: number;
    runningContainers: string[];
    /** How the agent isolates containers (network mode, user namespaces), as its last heartbeat said. */
    isolation?: { runtime: string; network: 'private' | 'host'; userNamespaces: boolean };
    /** The machine builds images (its agent runs with AGENT_BUILDER=true). */
    builder?: boolean;
    /** The site cache its volume chunks come through (AGENT_SITE_CACHE); absent: straight from the store. */
    siteCache?: string;
  } | null;
  createdAt: string;
  updatedAt: string;
}

/** `POST /api/v1/machines` (admin). */
export interface CreateMachineRequest {
  pool: string;
  /** Default: a random `m-…` id. */
  machineId?: string;
}

/** The answer to `POST /api/v1/machines`. */
export interface CreatedMachine {
  machineId: string;
  pool: string;
  /** Shown once; only its hash is kept. */
  joinToken: string;
  expiresAt: string;
  /** The line to run on the worker. */
  command: string;
}

/**
 * The answer to `POST /api/v1/machines/<id>/rotate-token` (operator) and
 * `POST /api/v1/machine/rotate-token` (the machine, with its current token): the new machine
 * token, shown once. The previous one stopped working when this answer was sent.
 */
export interface RotatedMachineToken {
  machineId: string;
  machineToken: string;
}

/** `GET /api/v1/machines/<id>/reputation`: the current score, then the history, newest first. */
export interface MachineReputation {
  machineId: string;
  /** null until the reputation service has scored the machine. */
  score: number | null;
  components: Record<string, number> | null;
  observed: number | null;
  /** `unproven` or `proven`; null until scored. */
  standing: ReputationStanding | null;
  computedAt: string | null;
  history: ReputationView[];
}

/** `GET /api/v1/machines/<id>/state-changes[?limit=]`: the states the machine entered, newest first. */
export interface MachineStateChanges {
  machineId: string;
  changes: { at: string; from: MachineState | null; to: MachineState; reason: string | null }[];
}
