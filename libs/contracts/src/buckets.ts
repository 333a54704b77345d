/**
 * NATS KV buckets shared between services, named without the namespace (the messaging
 * library prefixes `<namespace>_`). Declared with `Messaging.kv()`, which creates a bucket
 * when missing and otherwise opens it as it is, so whichever service comes first sets it up.
 */
export interface BucketSpec {
  readonly name: string;
  readonly owner: 'gateway' | 'scheduler' | 'autoscaler' | 'metering' | 'reputation' | 'agent';
  readonly description: string;
}

export const HEARTBEATS_BUCKET: BucketSpec = {
  name: 'heartbeats',
  owner: 'scheduler',
  description:
    'The last heartbeat of each machine (key: machine id; value: the MachineHeartbeat plus receivedAt), written by the scheduler. Bucket-wide TTL of MACHINE_HEARTBEAT_TTL_SECONDS, so a silent machine has no entry. Read by the gateway (CPU, memory and free GPUs in the machines API) and by each machine, its own entry only (whether the scheduler still hears it).',
};

export const DEPLOYMENTS_BUCKET: BucketSpec = {
  name: 'deployments',
  owner: 'gateway',
  description:
    'One DeploymentRecord per deployment version (key: <deploymentId>.<version>): the resolved spec, whether it is the latest and whether it is stopped. Written by the gateway on deploy, stop, start and delete (and all rewritten at its start); watched by the autoscaler and the scheduler.',
};

export const ROUTES_BUCKET: BucketSpec = {
  name: 'routes',
  owner: 'scheduler',
  description:
    'One RouteRecord per ready container (key: container id): where requests for a deployment version can go. Put by the scheduler when a container passes its health check, deleted when it stops, fails or its machine goes offline; watched by every gateway replica.',
};

/** Object store (not KV): request bodies too big for one invoke message. */
export const BODIES_BUCKET: BucketSpec = {
  name: 'bodies',
  owner: 'gateway',
  description:
    'Object store of request bodies too large for one core NATS message on tern.agent.*.invoke.*.v1 (object name: `<machineId>.<requestId>`, the machine the request is routed to). Put by the gateway, which serves it once and deletes it on GET /api/v1/agent/bodies/<requestId> to that machine only (agents have no access to the store); bucket-wide TTL of 5 minutes so an unread body does not stay.',
};

/** Object store (not KV): code bundles uploaded by `tern deploy`. */
export const CODE_BUCKET: BucketSpec = {
  name: 'code',
  owner: 'gateway',
  description:
    "Object store of code bundles (tar.gz of the spec's folder; object name: the sha256 hex digest, the spec's `code` without its `sha256:` prefix). Put by the gateway on PUT /api/v1/code/sha256:<hex> after checking the digest, at most CODE_BUNDLE_MAX_BYTES; read by the gateway only, which serves a bundle to a machine over GET /api/v1/agent/code/sha256:<hex> (machine token) while a container using it is placed there; the agent verifies the digest, caches bundles by digest and mounts them read-only at /app. Content-addressed, so never rewritten.",
};

/** Object store (not KV): task results too large for a row. */
export const RESULTS_BUCKET: BucketSpec = {
  name: 'results',
  owner: 'gateway',
  description:
    'Object store of task results over TASK_RESULT_INLINE_BYTES (object name: `<task id>.<attempt>`, see taskResultName; up to TASK_RESULT_MAX_BYTES). Put once per task and attempt by the gateway on PUT /api/v1/agent/tasks/<taskId>/attempts/<n>/result from the machine holding the lease of the attempt (a second PUT is 409; agents have no access to the store), before that machine publishes tern.task.<machine id>.completed.v1 with resultRef; the gateway takes a resultRef only when it names that object, and reads it when a caller asks for the result. No TTL: results live as long as their task.',
};

/** Object store (not KV): the chunks of every volume. */
export const VOLUME_CHUNKS_BUCKET: BucketSpec = {
  name: 'volume-chunks',
  owner: 'gateway',
  description:
    "Object store of volume chunks (object name: `<workspace id>.<sha256 hex>` — at most VOLUME_CHUNK_BYTES of a file's bytes). Put by the gateway only, after hashing what it received: on PUT /api/v1/volumes/<name>/files (a user's upload, streamed chunk by chunk) and on PUT /api/v1/agent/containers/<id>/volumes/<name>/chunks/<hex> (a commit from the machine of a container mounting the volume read-write). Read by the gateway only, which serves a chunk to a machine while a container placed on it mounts a volume holding it. Identical chunks are stored once per workspace; chunks no file refers to are swept an hour after their last use.",
};

/** The results object of one attempt of a task: the only resultRef the gateway accepts for it. */
export function taskResultName(taskId: string, attempt: number): string {
  return `${taskId}.${attempt}`;
}

/** The largest code bundle the gateway accepts (413 beyond). */
export const CODE_BUNDLE_MAX_BYTES = 64 * 1024 * 1024;

export const AUTOSCALER_LEADER_BUCKET: BucketSpec = {
  name: 'autoscaler-leader',
  owner: 'autoscaler',
  description:
    "A lease (key: leader; value: the holding replica id) so only one autoscaler replica publishes scale commands. Created if absent and refreshed every second with update(revision) by the holder; bucket-wide TTL of 5 s (NATS 2.9 has no per-key TTL), so a dead leader's lease lapses and another replica takes over.",
};

export const REPUTATION_LEADER_BUCKET: BucketSpec = {
  name: 'reputation-leader',
  owner: 'reputation',
  description:
    "A lease (key: leader; value: the holding replica id) so only one reputation replica scores: it recomputes every machine's score, appends the history and puts the `reputation` bucket. Every replica applies events to the records in Postgres. Kept like `autoscaler-leader`: 5 s bucket-wide TTL, renewed every second with update(revision).",
};

export const REPUTATION_BUCKET: BucketSpec = {
  name: 'reputation',
  owner: 'reputation',
  description:
    "Each machine's current reputation (key: machine id; value: {score, components, observed, standing, computedAt}, a ReputationEntry). Put by the reputation service when a score changes and refreshed at least every REPUTATION_HISTORY_INTERVAL_SECONDS; bucket-wide TTL of 1 hour (NATS 2.9 has no per-key TTL), so a machine no longer scored drops out. Watched by the scheduler (placement: min_reputation and ties) and read by the gateway (machines API); both fall back to the reputation_scores table when it is empty.",
};

/** Refreshed far more often than this, so only a machine that is no longer scored expires. */
export const REPUTATION_BUCKET_TTL_MS = 3600_000;

/** A value in the reputation bucket. */
export interface ReputationEntry {
  score: number;
  components: Record<string, number>;
  /** Starts and task attempts the control plane saw end on the machine (decayed). */
  observed: number;
  /** `unproven` until `observed` reaches the reputation service's threshold (5), then `proven`. */
  standing: ReputationStanding;
  computedAt: string;
}

/** How much of a machine's work the control plane has seen: its score is mostly a prior's guess until it is proven. */
export const REPUTATION_STANDINGS = ['unproven', 'proven'] as const;
export type ReputationStanding = (typeof REPUTATION_STANDINGS)[number];
