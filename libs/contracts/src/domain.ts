/**
 * The domain's vocabularies, shared by messages (contracts) and rows (persistence) so a
 * state written in one place is always understood in the other.
 */

/**
 * pending: created with a join token, agent not yet seen; registered: agent called in, no
 * heartbeat yet; ready: heartbeating, accepts containers; unschedulable: heartbeating but
 * below its pool's requirements (the reason says which); offline: heartbeats stopped.
 */
export const MACHINE_STATES = ['pending', 'registered', 'ready', 'unschedulable', 'offline'] as const;
export type MachineState = (typeof MACHINE_STATES)[number];

/**
 * What the control plane believes of a machine's hardware (libs/proof): unverified until a
 * challenge of every claimed device passed (verified) or one failed (quarantined, nothing placed).
 */
export const VERIFICATION_STATES = ['unverified', 'verified', 'quarantined'] as const;
export type VerificationState = (typeof VERIFICATION_STATES)[number];

/**
 * Credentials say what they are by their prefix, so a token pasted in the wrong place is
 * recognisable at a glance: an API token, a machine's one-time join token, a machine's own token.
 * The machine prefixes start with the API one, so test them before it.
 */
export const API_TOKEN_PREFIX = 'tern_';
export const JOIN_TOKEN_PREFIX = 'tern_join_';
export const MACHINE_TOKEN_PREFIX = 'tern_machine_';

/**
 * endpoint: HTTP requests; task_queue: pulls tasks; function: pulls tasks too, each one call (or
 * one chunk of a map) answered to a caller who may wait for it; cron: kept for specs stored with it.
 */
export const DEPLOYMENT_KINDS = ['endpoint', 'task_queue', 'function', 'cron'] as const;
export type DeploymentKind = (typeof DEPLOYMENT_KINDS)[number];

/** Kinds whose containers pull tasks from TASKS (a task policy, a task consumer, backlog scaling). */
export function pullsTasks(kind: string | undefined): boolean {
  return kind === 'task_queue' || kind === 'function';
}

/** deleted: hidden from the API, rows kept for history and metering; deploying the name again revives it. */
export const DEPLOYMENT_STATES = ['pending', 'building', 'ready', 'failed', 'stopped', 'deleted'] as const;
export type DeploymentState = (typeof DEPLOYMENT_STATES)[number];

export const CONTAINER_STATES = ['pending', 'scheduled', 'starting', 'running', 'stopping', 'stopped', 'failed'] as const;
export type ContainerState = (typeof CONTAINER_STATES)[number];

export const TASK_STATES = ['PENDING', 'RUNNING', 'COMPLETE', 'ERROR', 'CANCELLED', 'EXPIRED', 'TIMEOUT', 'RETRY'] as const;
export type TaskState = (typeof TASK_STATES)[number];
export const FINAL_TASK_STATES: readonly TaskState[] = ['COMPLETE', 'ERROR', 'CANCELLED', 'EXPIRED', 'TIMEOUT'];

/** Autoscaling policies a deployment may choose. */
export const SCALE_POLICIES = ['queue_depth', 'request_latency', 'predictive', 'concurrency', 'fixed'] as const;
export type ScalePolicy = (typeof SCALE_POLICIES)[number];
