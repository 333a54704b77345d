import { type Contract, type StreamName } from './contract.js';
import {
  AUTOSCALER_LEADER_BUCKET,
  REPUTATION_LEADER_BUCKET,
  type BucketSpec,
  BODIES_BUCKET,
  CODE_BUCKET,
  DEPLOYMENTS_BUCKET,
  HEARTBEATS_BUCKET,
  RESULTS_BUCKET,
  REPUTATION_BUCKET,
  ROUTES_BUCKET,
  VOLUME_CHUNKS_BUCKET,
} from './buckets.js';
import {
  AGENT_CONTAINER_START,
  AGENT_CONTAINER_STOP,
  AGENT_LOAD_REPORT,
  SERVER_LOAD_REPORT,
  AGENT_PROOF_CHALLENGE,
  AGENT_PROOF_PREPARE,
  AGENT_PROOF_PROBE,
  AGENT_TASK_CANCEL,
  AGENT_TASK_SPOT_CHECK,
  AGENT_VOLUME_COMMIT,
  CONTAINER_FAILED,
  CONTAINER_LOG_LINE,
  CONTAINER_READY,
  CONTAINER_SCHEDULED,
  CONTAINER_STARTED,
  CONTAINER_STARTING,
  CONTAINER_STOPPED,
  INVOKE,
  AGENT_SANDBOX_CREATE,
  AGENT_SANDBOX_REMOVE,
  AGENT_SANDBOX_SNAPSHOT,
  AGENT_IMAGE_BUILD,
  SANDBOX_CALL,
  SANDBOX_ENDED,
  SANDBOX_STARTED,
  SANDBOX_TUNNEL_IN,
  SANDBOX_TUNNEL_OPEN,
  SANDBOX_TUNNEL_OUT,
  CONTAINER_TUNNEL_OPEN,
  LOAD_REPORT,
  MACHINE_BEAT,
  MACHINE_DISCOVERED,
  MACHINE_FAULT,
  MACHINE_HEARTBEAT,
  MACHINE_NETWORK_TESTED,
  MACHINE_REGISTERED,
  MACHINE_STATE_CHANGED,
  NETWORK_TEST_ECHO,
  REPUTATION_SCORE,
  SCALE_BACKLOG,
  SCALE_COMMAND,
  SCALE_DECISION,
  TASK_ATTEMPT_ENDED,
  TASK_ATTEMPTS_ENDED,
  TASK_CANCELLED,
  TASK_COMPLETED,
  TASK_COMPLETED_MANY,
  TASK_ENDED,
  TASK_FAILED,
  TASK_ITEM,
  TASK_SPOT_CHECK_ENDED,
  TASK_SPOT_CHECKED,
  TASK_STARTED,
  TASK_SUBMIT,
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
  /**
   * What an integrator's NATS user (`tern nats user create`) of one workspace may do with the
   * subject, its one `*` token filled with that workspace's id: hear it (`events`) or send it
   * (`submit`). Absent: integrators have no access.
   */
  readonly integrator?: IntegratorScope;
}

/** What an integrator's user may be allowed: its workspace's task events, submitting its workspace's tasks. */
export const INTEGRATOR_SCOPES = ['events', 'submit'] as const;
export type IntegratorScope = (typeof INTEGRATOR_SCOPES)[number];

/** An integrator hears `events` subjects and publishes (requests) `submit` ones. */
export const INTEGRATOR_DIRECTION: Readonly<Record<IntegratorScope, 'publish' | 'subscribe'>> = { events: 'subscribe', submit: 'publish' };

const access = (
  contract: Contract,
  publish: readonly NatsPrincipal[],
  subscribe: readonly NatsPrincipal[],
  byMachine = false,
): ContractAccess => ({ contract, publish, subscribe, byMachine });

const forIntegrators = (a: ContractAccess, integrator: IntegratorScope): ContractAccess => ({ ...a, integrator });

export const CONTRACT_ACCESS: readonly ContractAccess[] = [
  access(AGENT_CONTAINER_START, ['scheduler'], ['agent'], true),
  access(AGENT_CONTAINER_STOP, ['scheduler'], ['agent'], true),
  // Proof of hardware: only the scheduler challenges, only the challenged machine hears it.
  access(AGENT_PROOF_PREPARE, ['scheduler'], ['agent'], true),
  access(AGENT_PROOF_CHALLENGE, ['scheduler'], ['agent'], true),
  access(AGENT_PROOF_PROBE, ['scheduler'], ['agent'], true),
  // Reputation times a start from the scheduler's command, not from the agent's word.
  access(CONTAINER_SCHEDULED, ['scheduler'], ['scheduler', 'reputation'], true),
  access(CONTAINER_STARTING, ['agent'], ['scheduler'], true),
  access(CONTAINER_STARTED, ['agent'], ['scheduler', 'metering'], true),
  access(CONTAINER_READY, ['agent'], ['scheduler', 'reputation'], true),
  access(CONTAINER_FAILED, ['agent', 'scheduler'], ['scheduler', 'metering', 'reputation'], true),
  access(CONTAINER_STOPPED, ['agent'], ['scheduler', 'metering'], true),
  access(CONTAINER_LOG_LINE, ['agent'], ['gateway'], true),
  access(INVOKE, ['gateway'], ['agent'], true),
  access(AGENT_VOLUME_COMMIT, ['gateway'], ['agent'], true),
  access(AGENT_SANDBOX_CREATE, ['gateway'], ['agent'], true),
  access(AGENT_SANDBOX_REMOVE, ['gateway'], ['agent'], true),
  // Carries a registry token that pushes this snapshot: only the sandbox's machine hears it.
  access(AGENT_SANDBOX_SNAPSHOT, ['gateway'], ['agent'], true),
  access(SANDBOX_CALL, ['gateway'], ['agent'], true),
  access(SANDBOX_TUNNEL_OPEN, ['gateway'], ['agent'], true),
  access(SANDBOX_TUNNEL_IN, ['gateway'], ['agent'], true),
  access(SANDBOX_TUNNEL_OUT, ['agent'], ['gateway'], true),
  access(CONTAINER_TUNNEL_OPEN, ['gateway'], ['agent'], true),
  // Only the chosen builder hears a build (it carries the registry's push user).
  access(AGENT_IMAGE_BUILD, ['gateway'], ['agent'], true),
  access(SANDBOX_STARTED, ['gateway'], ['metering', 'reputation']),
  access(SANDBOX_ENDED, ['gateway'], ['metering', 'reputation']),
  access(LOAD_REPORT, ['gateway'], ['autoscaler']),
  access(AGENT_LOAD_REPORT, ['agent'], ['autoscaler'], true),
  access(SERVER_LOAD_REPORT, ['agent'], ['autoscaler'], true),
  access(MACHINE_REGISTERED, ['gateway'], []),
  access(MACHINE_DISCOVERED, ['gateway'], []),
  access(MACHINE_BEAT, ['agent', 'gateway'], ['scheduler', 'reputation'], true),
  // The stored beats of the previous release's agents: read for one release more (MACHINE_HEARTBEAT).
  access(MACHINE_HEARTBEAT, ['agent', 'gateway'], ['scheduler', 'reputation'], true),
  // The agent's own network test: judged by pool rules, scored by nothing (a stranger's word).
  access(MACHINE_NETWORK_TESTED, ['agent'], ['scheduler'], true),
  // Faults the control plane saw itself: only the scheduler says them, only reputation hears them.
  access(MACHINE_FAULT, ['scheduler'], ['reputation'], true),
  // A machine hears its own state changes only (its dashboard shows the scheduler's verdict).
  access(MACHINE_STATE_CHANGED, ['gateway', 'scheduler'], ['scheduler', 'reputation', 'agent'], true),
  access(NETWORK_TEST_ECHO, ['agent'], ['gateway'], true),
  access(REPUTATION_SCORE, ['reputation'], []),
  access(SCALE_BACKLOG, ['gateway'], ['autoscaler']),
  access(SCALE_COMMAND, ['autoscaler'], ['scheduler']),
  access(SCALE_DECISION, ['autoscaler'], []),
  // Workspace-visible task facts the gateway vouches for (the workspace id a token) and the
  // integrators' submit request; machines' own task events are not an integrator's to hear.
  forIntegrators(access(TASK_SUBMITTED, ['gateway'], ['autoscaler']), 'events'),
  forIntegrators(access(TASK_CANCELLED, ['gateway'], []), 'events'),
  forIntegrators(access(TASK_SUBMIT, [], ['gateway']), 'submit'),
  // A cancel goes only to the machine that holds the task's lease.
  access(AGENT_TASK_CANCEL, ['gateway'], ['agent'], true),
  // Agents' task events are claims only the gateway hears: it checks them against the lease and
  // says what it accepted in task.attempt-ended, which metering and reputation read instead.
  access(TASK_STARTED, ['agent'], ['gateway'], true),
  access(TASK_COMPLETED, ['agent'], ['gateway'], true),
  access(TASK_COMPLETED_MANY, ['agent'], ['gateway'], true),
  // The gateway reports an attempt that never reported as lost (container-lost) when the next one starts.
  access(TASK_FAILED, ['agent', 'gateway'], ['gateway'], true),
  access(TASK_ATTEMPT_ENDED, ['gateway'], ['metering', 'reputation']),
  access(TASK_ATTEMPTS_ENDED, ['gateway'], ['metering', 'reputation']),
  // Spot checks: only the chosen verifier hears the run; its answer is a claim only the gateway
  // hears, and only the gateway's verdict reaches reputation.
  access(AGENT_TASK_SPOT_CHECK, ['gateway'], ['agent'], true),
  access(TASK_SPOT_CHECKED, ['agent'], ['gateway'], true),
  access(TASK_SPOT_CHECK_ENDED, ['gateway'], ['reputation']),
  forIntegrators(access(TASK_ENDED, ['gateway'], ['gateway']), 'events'),
  // The scheduler publishes schedule ticks' tasks. The autoscaler reads the queue's consumer state (pending tasks). Machines never subscribe to
  // task subjects: they pull one version's consumer through a task permit (TASK_PERMIT below).
  access(TASK_ITEM, ['gateway', 'scheduler'], ['autoscaler']),
  access(USAGE_INTERVAL, ['metering'], []),
];

/**
 * Contracts a machine uses with any value in a wildcard token (no machine id in their subject).
 * None today: kept so a new one is a visible, one-place exception (permissions.spec.ts).
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
  /**
   * Delete an entry's message by its stream sequence, and nothing else: no put, so whoever
   * may erase an entry still cannot write one.
   */
  readonly erase?: readonly NatsPrincipal[];
}

export const BUCKET_ACCESS: readonly BucketAccess[] = [
  // A machine reads its own entry only (the key is its machine id): libs/nats-auth grants it a direct get of that key.
  // The gateway erases a deleted machine's entry (HeartbeatSnapshotReader.remove).
  { bucket: HEARTBEATS_BUCKET, kind: 'kv', write: ['scheduler'], read: ['gateway', 'agent'], erase: ['gateway'] },
  { bucket: DEPLOYMENTS_BUCKET, kind: 'kv', write: ['gateway'], read: ['autoscaler', 'gateway'] },
  { bucket: ROUTES_BUCKET, kind: 'kv', write: ['scheduler'], read: ['gateway', 'autoscaler'] },
  { bucket: AUTOSCALER_LEADER_BUCKET, kind: 'kv', write: ['autoscaler'], read: ['autoscaler'] },
  { bucket: REPUTATION_BUCKET, kind: 'kv', write: ['reputation'], read: ['gateway', 'scheduler'] },
  { bucket: REPUTATION_LEADER_BUCKET, kind: 'kv', write: ['reputation'], read: ['reputation'] },
  // Machines have no access to the object stores: they fetch code bundles and large request
  // bodies from the gateway and hand it large task results over HTTPS with their machine token
  // (AGENT_CODE_PATH, AGENT_BODIES_PATH, agentResultPath), which checks placement and leases.
  { bucket: BODIES_BUCKET, kind: 'object', write: ['gateway'], read: ['gateway'] },
  { bucket: CODE_BUCKET, kind: 'object', write: ['gateway'], read: ['gateway'] },
  { bucket: RESULTS_BUCKET, kind: 'object', write: ['gateway'], read: ['gateway'] },
  // Volume chunks too: an agent fetches and commits them over agentVolumePath (placement checked).
  { bucket: VOLUME_CHUNKS_BUCKET, kind: 'object', write: ['gateway'], read: ['gateway'] },
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
 * How machines get tasks: not through their own user, whose permissions hold no JetStream
 * consumer API at all, but through a task permit, a second user for the same machine key that the
 * gateway signs per task-queue version placed on the machine (agentTaskPermitPath) and whose
 * permissions allow pulling and acking that version's consumer (`taskConsumerName`) only
 * (libs/nats-auth taskPermitPermissions). So a machine pulls no task of a version not placed on it.
 */
export const TASK_PERMIT: Contract = TASK_ITEM;

/** The access entry of a contract (every contract has one: permissions.spec.ts). */
export function contractAccess(contract: Contract): ContractAccess | undefined {
  return CONTRACT_ACCESS.find((a) => a.contract === contract);
}
