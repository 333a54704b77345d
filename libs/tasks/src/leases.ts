import type { TaskState } from '#tern/contracts';
import { isFinal } from './states.js';

/**
 * Who holds a task's lease: the attempt last started, on which machine and container (recorded
 * once the start's placement is checked). An outcome is believed only from its holder.
 */
export interface TaskLease {
  state: TaskState;
  attempts: number;
  machineId: string | null;
  containerId: string | null;
}

/** Who reports an attempt's outcome: it changes the task only when it holds the attempt's lease. */
export interface LeaseClaim {
  taskId: string;
  attempt: number;
  machineId: string;
  containerId?: string | null;
}

/**
 * How long a pulled task may go without a sign of life before JetStream hands it to another
 * agent. The agent signals progress every TASK_PROGRESS_EVERY_MS while the task runs, so only a
 * dead agent or a lost machine lets it lapse: it bounds how fast a lost task is retried, not
 * how long a task may run (that is its timeout, enforced by the agent).
 */
export const TASK_ACK_WAIT_MS = 30_000;
/** How often the agent running a task tells JetStream it is still at it: three times per ack wait. */
export const TASK_PROGRESS_EVERY_MS = Math.floor(TASK_ACK_WAIT_MS / 3);
/**
 * How long an agent holds back an attempt's task.started. An attempt that ends sooner with a
 * result sends no start at all: its task.completed carries `withStart` and the gateway records
 * the start and the result in one statement (one message and one write per task fewer for the
 * quick tasks that make most of a busy queue). Also the most a completion `withStart` may claim
 * to have run: the gateway never sees such a start, so it records one no earlier than this long
 * before the completion reached NATS.
 */
export const TASK_START_REPORT_DELAY_MS = 50;

/**
 * Why a task event was not believed. final and stale-attempt are the ordinary leftovers of
 * at-least-once delivery (a repeat, a lost attempt's late word); the rest are refusals of a
 * machine speaking for a task it does not hold.
 */
export type LeaseRefusal =
  'unknown-task' | 'final' | 'stale-attempt' | 'not-yet-leased' | 'not-lease-holder' | 'no-placement' | 'foreign-result';

/** Refusals that are no sign of a machine overstepping: acknowledged quietly, not counted. */
export const ORDINARY_REFUSALS: ReadonlySet<LeaseRefusal> = new Set(['final', 'stale-attempt']);

/** Why an outcome whose conditional update changed nothing was refused, judged against the lease as it stands now. */
export function whyRefused(lease: TaskLease | undefined, claim: LeaseClaim): { why: LeaseRefusal; detail: string } {
  if (!lease) return { why: 'unknown-task', detail: `task ${claim.taskId} does not exist` };
  if (isFinal(lease.state)) return { why: 'final', detail: `task ${claim.taskId} is ${lease.state} already` };
  if (lease.attempts > claim.attempt)
    return { why: 'stale-attempt', detail: `attempt ${claim.attempt} of task ${claim.taskId} was followed by attempt ${lease.attempts}` };
  if (lease.attempts < claim.attempt || !lease.machineId)
    return {
      why: 'not-yet-leased',
      detail: `no lease of attempt ${claim.attempt} of task ${claim.taskId} is recorded (its start was not seen or not believed)`,
    };
  // The claimant's own lease, recorded between the conditional update and this read: ask again.
  if (lease.machineId === claim.machineId && lease.containerId === (claim.containerId ?? null))
    return {
      why: 'not-yet-leased',
      detail: `the lease of attempt ${claim.attempt} of task ${claim.taskId} was recorded while this was judged`,
    };
  return {
    why: 'not-lease-holder',
    detail: `attempt ${claim.attempt} of task ${claim.taskId} is leased to container ${lease.containerId ?? '?'} on machine ${lease.machineId}, not to ${claim.containerId ?? '?'} on ${claim.machineId}`,
  };
}

/**
 * Whether a start refused by its conditional update came from a machine the task was not
 * placed on: the task is still open and on an earlier attempt, so nothing but the placement
 * check (container on that machine for the task's version) can have stopped it.
 */
export function refusedForPlacement(lease: TaskLease | undefined, attempt: number): boolean {
  return Boolean(lease && lease.attempts < attempt && !isFinal(lease.state));
}

/** The attempt a start replaced, as the row stood before it was recorded. */
export interface ReplacedAttempt {
  was: TaskState;
  wasAttempt: number;
  wasMachine: string | null;
}

/**
 * Whether the attempt a start replaced was lost: it was still RUNNING, the one just before, on a
 * known machine, so its agent never reported (its container or machine was lost).
 */
export function lostBeforeStart(before: ReplacedAttempt, attempt: number): before is ReplacedAttempt & { wasMachine: string } {
  return before.was === 'RUNNING' && before.wasAttempt === attempt - 1 && Boolean(before.wasMachine);
}

/** Whether `machineId` holds the lease of attempt `attempt` of a task still open: only it may store that attempt's result. */
export function holdsOpenLease(lease: TaskLease, machineId: string, attempt: number): boolean {
  return lease.machineId === machineId && lease.attempts === attempt && !isFinal(lease.state);
}
