import { type Contract, type StreamName } from './contract.js';
import {
  AUTOSCALER_LEADER_BUCKET,
  type BucketSpec,
  BODIES_BUCKET,
  CODE_BUCKET,
  DEPLOYMENTS_BUCKET,
  HEARTBEATS_BUCKET,
  RESULTS_BUCKET,
  REPUTATION_BUCKET,
  ROUTES_BUCKET,
} from './buckets.js';
import {
  AGENT_CONTAINER_START,
  AGENT_CONTAINER_STOP,
  AGENT_LOAD_REPORT,
  AGENT_TASK_CANCEL,
  CONTAINER_FAILED,
  CONTAINER_LOG_LINE,
  CONTAINER_READY,
  CONTAINER_SCHEDULED,
  CONTAINER_STARTED,
  CONTAINER_STARTING,
  CONTAINER_STOPPED,
  INVOKE,
  LOAD_REPORT,
  MACHINE_DISCOVERED,
  MACHINE_HEARTBEAT,
  MACHINE_NETWORK_TESTED,
  MACHINE_REGISTERED,
  MACHINE_STATE_CHANGED,
  NETWORK_TEST_ECHO,
  REPUTATION_SCORE,
  SCALE_BACKLOG,
  SCALE_COMMAND,
  SCALE_DECISION,
  TASK_CANCELLED,
  TASK_COMPLETED,
  TASK_ENDED,
  TASK_FAILED,
  TASK_ITEM,
  TASK_STARTED,
  TASK_SUBMITTED,
  USAGE_INTERVAL,
} from './messages.js';

/**
 * Who may do what on NATS: the one table the NATS permissions of every principal are derived
 * from (libs/nats-auth turns it into user JWTs). A contract or bucket missing here is caught by
 * permissions.spec.ts, so a new message cannot ship without saying who sends and who hears it.
 *
 * Principals: the five control-plane services, each its own NATS user, and `agent`, which stands
 * for every machine: each machine gets its own user whose permissions name its machine id.
 */
export type ServiceNatsPrincipal = 'gateway' | 'scheduler' | 'autoscaler' | 'metering' | 'reputation';
export type NatsPrincipal = ServiceNatsPrincipal | 'agent';
export const SERVICE_NATS_PRINCIPALS: readonly ServiceNatsPrincipal[] = ['gateway', 'scheduler', 'autoscaler', 'metering', 'reputation'];

export interface ContractAccess {
  readonly contract: Contract;
  /** Publish (events, commands), send (requests) or reply. */
  readonly publish: readonly NatsPrincipal[];
  /** Subscribe: consumers, listeners and the servers of requests. */
  readonly subscribe: readonly NatsPrincipal[];
  /**
   * The subject's third token is a machine id: a machine may use the subject only with its own
   * id there (`tern.heartbeat.<its id>.v1`). Without it, a machine that publishes or subscribes
   * the subject can use it with any token; those entries are listed in AGENT_UNSCOPED below.
   */
  readonly byMachine?: boolean;
}

const access = (
  contract: Contract,
  publish: readonly NatsPrincipal[],
  subscribe: readonly NatsPrincipal[],
  byMachine = false,
): ContractAccess => ({ contract, publish, subscribe, byMachine });

export const CONTRACT_ACCESS: readonly ContractAccess[] = [
  access(AGENT_CONTAINER_START, ['scheduler'], ['agent'], true),
  access(AGENT_CONTAINER_STOP, ['scheduler'], ['agent'], true),
  access(CONTAINER_SCHEDULED, ['scheduler'], ['scheduler'], true),
  access(CONTAINER_STARTING, ['agent'], ['scheduler'], true),
  access(CONTAINER_STARTED, ['agent'], ['scheduler', 'metering'], true),
  access(CONTAINER_READY, ['agent'], ['scheduler', 'reputation'], true),
  access(CONTAINER_FAILED, ['agent', 'scheduler'], ['scheduler', 'metering', 'reputation'], true),
  access(CONTAINER_STOPPED, ['agent'], ['scheduler', 'metering'], true),
  access(CONTAINER_LOG_LINE, ['agent'], ['gateway'], true),
  access(INVOKE, ['gateway'], ['agent'], true),
  access(LOAD_REPORT, ['gateway'], ['autoscaler']),
  access(AGENT_LOAD_REPORT, ['agent'], ['autoscaler'], true),
  access(MACHINE_REGISTERED, ['gateway'], []),
  access(MACHINE_DISCOVERED, ['gateway'], []),
  access(MACHINE_HEARTBEAT, ['agent', 'gateway'], ['scheduler', 'reputation'], true),
  access(MACHINE_NETWORK_TESTED, ['agent'], ['scheduler', 'reputation'], true),
  access(MACHINE_STATE_CHANGED, ['gateway', 'scheduler'], ['scheduler', 'reputation', 'agent']),
  access(NETWORK_TEST_ECHO, ['agent'], ['gateway'], true),
  access(REPUTATION_SCORE, ['reputation'], []),
  access(SCALE_BACKLOG, ['gateway'], ['autoscaler']),
  access(SCALE_COMMAND, ['autoscaler'], ['scheduler']),
  access(SCALE_DECISION, ['autoscaler'], []),
  access(TASK_SUBMITTED, ['gateway'], ['autoscaler']),
  access(TASK_CANCELLED, ['gateway'], []),
  // A cancel goes only to the machine that holds the task's lease.
  access(AGENT_TASK_CANCEL, ['gateway'], ['agent'], true),
  access(TASK_STARTED, ['agent'], ['gateway', 'metering'], true),
  access(TASK_COMPLETED, ['agent'], ['gateway', 'metering', 'reputation'], true),
  // The gateway reports an attempt that never reported as lost (container-lost) when the next one starts.
  access(TASK_FAILED, ['agent', 'gateway'], ['gateway', 'metering', 'reputation'], true),
  access(TASK_ENDED, ['gateway'], ['gateway']),
  // The autoscaler reads the queue's consumer state (pending tasks); agents pull from it.
  access(TASK_ITEM, ['gateway', 'scheduler'], ['agent', 'autoscaler']),
  access(USAGE_INTERVAL, ['metering'], []),
];

/**
 * Contracts a machine uses with any value in a wildcard token (no machine id in their subject):
 * pulling task-queue items (any durable consumer of TASKS, see AGENT_PULLS) and hearing machine
 * state changes. Kept in one list so narrowing them is a one-place change.
 */
export const AGENT_UNSCOPED: readonly Contract[] = CONTRACT_ACCESS.filter(
  (a) => !a.byMachine && (a.publish.includes('agent') || a.subscribe.includes('agent')),
).map((a) => a.contract);

export interface BucketAccess {
  readonly bucket: BucketSpec;
  readonly kind: 'kv' | 'object';
  /** Put, delete (and create the bucket). */
  readonly write: readonly NatsPrincipal[];
  /** Get and watch. */
  readonly read: readonly NatsPrincipal[];
}

export const BUCKET_ACCESS: readonly BucketAccess[] = [
  { bucket: HEARTBEATS_BUCKET, kind: 'kv', write: ['scheduler'], read: ['gateway', 'agent'] },
  { bucket: DEPLOYMENTS_BUCKET, kind: 'kv', write: ['gateway'], read: ['autoscaler', 'gateway'] },
  { bucket: ROUTES_BUCKET, kind: 'kv', write: ['scheduler'], read: ['gateway', 'autoscaler'] },
  { bucket: AUTOSCALER_LEADER_BUCKET, kind: 'kv', write: ['autoscaler'], read: ['autoscaler'] },
  { bucket: REPUTATION_BUCKET, kind: 'kv', write: ['reputation'], read: ['gateway', 'scheduler'] },
  // Machines have no access to the object stores: they fetch code bundles and large request
  // bodies from the gateway and hand it large task results over HTTPS with their machine token
  // (AGENT_CODE_PATH, AGENT_BODIES_PATH, agentResultPath), which checks placement and leases.
  { bucket: BODIES_BUCKET, kind: 'object', write: ['gateway'], read: ['gateway'] },
  { bucket: CODE_BUCKET, kind: 'object', write: ['gateway'], read: ['gateway'] },
  { bucket: RESULTS_BUCKET, kind: 'object', write: ['gateway'], read: ['gateway'] },
];

/**
 * Streams each principal declares at start-up (idempotent create-or-update; see streams.ts).
 * Machines declare nothing: streams, consumers, buckets and stores are the control plane's.
 */
export const STREAM_DECLARERS: Readonly<Record<NatsPrincipal, readonly StreamName[]>> = {
  gateway: ['TASKS', 'EVENTS', 'HEARTBEATS'],
  // The scheduler also declares a task-queue version's consumer before it starts its container.
  scheduler: ['EVENTS', 'COMMANDS', 'HEARTBEATS', 'TASKS'],
  autoscaler: ['EVENTS', 'COMMANDS', 'TASKS'],
  metering: ['EVENTS'],
  reputation: ['EVENTS', 'HEARTBEATS'],
  agent: [],
};

/**
 * Streams a machine pulls from through durable consumers (its task queues). A machine's other
 * subscriptions are core NATS: it gets no other stream's consumer or message-get API, so it
 * cannot read the stored events or tasks of others.
 */
export const AGENT_PULLS: readonly StreamName[] = ['TASKS'];

/** The access entry of a contract (every contract has one: permissions.spec.ts). */
export function contractAccess(contract: Contract): ContractAccess | undefined {
  return CONTRACT_ACCESS.find((a) => a.contract === contract);
}
