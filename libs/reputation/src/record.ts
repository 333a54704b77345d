import { type DeafSpan, EMPTY_HEARTBEATS, type HeartbeatRecord, recordHeartbeat } from './heartbeat.js';
import { type LatencyRecord, recordLatency } from './latency.js';
import { type NetworkRecord } from './network.js';
import { type Outcome, type OutcomeBook, pruneOutcomes, recordOutcome } from './outcomes.js';
import { type ReputationParams } from './params.js';
import { recordTransition, type Transition } from './uptime.js';

/**
 * Everything the score of one machine is computed from. Plain JSON (it is kept in a jsonb
 * column and read back as it is); the record* functions below change it in place.
 */
export interface MachineRecord {
  readonly machineId: string;
  pool: string | null;
  transitions: Transition[];
  tasks: OutcomeBook;
  starts: OutcomeBook;
  latency: LatencyRecord | null;
  heartbeats: HeartbeatRecord;
  /**
   * The machine's network as the control plane measured it, on bytes it sent and received itself;
   * null until it has. The agent's own test (machine.network-tested) is never stored here: a
   * stranger's word about its link scores nothing. (Records stored before kept that word under
   * `network`, which is no longer read.)
   */
  measuredNetwork: NetworkRecord | null;
  /** Keys of recently counted events, so a redelivered one is not counted twice. */
  seen: string[];
  /**
   * Containers the scheduler sent this machine a start command for, not yet ready or failed:
   * container id to when the command was observed (its message reached NATS). A start's
   * latency runs from here to when the ready reached NATS, never from the agent's own measure.
   */
  commands: Record<string, number>;
}

/** How many event keys a machine remembers; redeliveries come within seconds, not thousands of events. */
const SEEN_LIMIT = 512;

export function newMachineRecord(machineId: string, pool: string | null = null): MachineRecord {
  return {
    machineId,
    pool,
    transitions: [],
    tasks: {},
    starts: {},
    latency: null,
    heartbeats: EMPTY_HEARTBEATS,
    measuredNetwork: null,
    seen: [],
    commands: {},
  };
}

/**
 * A record as it is stored, put back together: the document (any field missing from an older
 * one starts empty) and the heartbeats, which are kept apart so a beat rewrites only them.
 */
export function machineRecordOf(
  machineId: string,
  pool: string | null,
  document: object | undefined,
  heartbeats: object | null,
): MachineRecord {
  // An older record's `network` was the agent's own test: dropped, so it is never scored again.
  const { network: _agentsWord, ...stored } = (document ?? {}) as Partial<MachineRecord> & { network?: unknown };
  return {
    ...newMachineRecord(machineId),
    ...stored,
    machineId,
    pool,
    heartbeats: heartbeatsOf(heartbeats),
  };
}

/** A record's heartbeats as stored apart from its document (null before the first beat). */
export function heartbeatsOf(stored: object | null): HeartbeatRecord {
  return (stored as HeartbeatRecord | null) ?? EMPTY_HEARTBEATS;
}

/** Whether an event was counted already; remembers it if not. */
export function firstSighting(r: MachineRecord, key: string): boolean {
  if (r.seen.includes(key)) return false;
  r.seen.push(key);
  if (r.seen.length > SEEN_LIMIT) r.seen.splice(0, r.seen.length - SEEN_LIMIT);
  return true;
}

export function applyState(r: MachineRecord, online: boolean, at: number, now: number): void {
  recordTransition(r.transitions, { at, online }, now);
}

/**
 * A heartbeat also proves the machine is up: a machine whose state changes were never seen
 * (they are older than the stream) starts its record at its first beat.
 */
export function applyHeartbeat(
  r: MachineRecord,
  sequence: number,
  arrival: number,
  params: ReputationParams,
  deaf: readonly DeafSpan[] = [],
): void {
  if (!r.transitions.length) r.transitions.push({ at: arrival, online: true });
  r.heartbeats = recordHeartbeat(r.heartbeats, sequence, arrival, params, deaf);
}

export function applyTaskOutcome(
  r: MachineRecord,
  key: string,
  deploymentId: string,
  outcome: Outcome,
  at: number,
  params: ReputationParams,
): boolean {
  if (!firstSighting(r, key)) return false;
  recordOutcome(r.tasks, deploymentId, outcome, at, params);
  pruneOutcomes(r.tasks, at, params);
  return true;
}

/** One outcome per container start: the first of ready and failed wins. */
export function applyStartOutcome(
  r: MachineRecord,
  containerId: string,
  deploymentId: string,
  outcome: Outcome,
  at: number,
  params: ReputationParams,
  latencyMs?: number,
): boolean {
  if (!firstSighting(r, `start:${containerId}`)) return false;
  recordOutcome(r.starts, deploymentId, outcome, at, params);
  pruneOutcomes(r.starts, at, params);
  if (latencyMs !== undefined) r.latency = recordLatency(r.latency, latencyMs, at, params);
  return true;
}

/** Start commands remembered at most this long: a container not ready within a day is not waited for. */
const COMMAND_TTL_MS = 86_400_000;
/** And at most this many per machine. */
const COMMAND_LIMIT = 1024;

/** The scheduler sent the machine a start command for a container, observed at `at`. */
export function applyStartCommand(r: MachineRecord, containerId: string, at: number): void {
  r.commands ??= {};
  if (!(containerId in r.commands)) r.commands[containerId] = at;
  const kept = Object.entries(r.commands)
    .filter(([, t]) => t >= at - COMMAND_TTL_MS)
    .sort((x, y) => x[1] - y[1])
    .slice(-COMMAND_LIMIT);
  r.commands = Object.fromEntries(kept);
}

/** When the start command of a container was observed on this machine, if it was. */
export function commandedAt(r: MachineRecord | undefined, containerId: string): number | undefined {
  return r?.commands?.[containerId];
}

/**
 * A ready the control plane observed at `readyAt` for a container it commanded this machine to
 * start: a successful start whose latency is the time between the two observations. A ready
 * for a container never commanded here counts nothing (false).
 */
export function applyObservedReady(
  r: MachineRecord,
  containerId: string,
  deploymentId: string,
  readyAt: number,
  params: ReputationParams,
): boolean {
  const commanded = commandedAt(r, containerId);
  if (commanded === undefined) return false;
  delete r.commands[containerId];
  return applyStartOutcome(r, containerId, deploymentId, 'success', readyAt, params, Math.max(0, readyAt - commanded));
}

/** A network measurement the control plane made itself (newest wins). */
export function applyMeasuredNetwork(r: MachineRecord, test: NetworkRecord): void {
  if (!r.measuredNetwork || r.measuredNetwork.testedAt <= test.testedAt) r.measuredNetwork = test;
}

/**
 * A fault the control plane saw itself (see MACHINE_FAULT): the machine never answered a start
 * command, a container it accepted never became ready within the scheduler's start limit, or a
 * container was lost with the machine. Each counts in full against the machine, in the starts
 * it is judged on: a start fault as that container's start (one outcome per start, whichever of
 * ready, failed and this fact comes first), a container lost after it was ready as one more
 * container the machine did not keep. The container's start command is spent either way.
 */
export function applyObservedFault(
  r: MachineRecord,
  fault: { containerId: string; deploymentId: string; afterReady: boolean },
  at: number,
  params: ReputationParams,
): boolean {
  delete r.commands?.[fault.containerId];
  if (!fault.afterReady) return applyStartOutcome(r, fault.containerId, fault.deploymentId, 'machine', at, params);
  if (!firstSighting(r, `lost:${fault.containerId}`)) return false;
  recordOutcome(r.starts, fault.deploymentId, 'machine', at, params);
  pruneOutcomes(r.starts, at, params);
  return true;
}
