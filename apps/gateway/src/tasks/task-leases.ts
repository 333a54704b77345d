import type { LeaseClaim, TaskLease } from '#tern/persistence';
import { isFinal } from './task-views.js';

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
