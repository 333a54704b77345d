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
    'The last heartbeat of each machine (key: machine id; value: the MachineHeartbeat plus receivedAt), written by the scheduler. Bucket-wide TTL of MACHINE_HEARTBEAT_TTL_SECONDS, so a silent machine has no entry. Read by the gateway (CPU, memory and free GPUs in the machines API).',
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
