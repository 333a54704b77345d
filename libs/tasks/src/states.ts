import { FINAL_TASK_STATES, type TaskState } from '#tern/contracts';

export { FINAL_TASK_STATES, TASK_STATES, type TaskState } from '#tern/contracts';

/** Whether a task has ended: nothing changes it after (no event, no cancel, no sweep). */
export function isFinal(state: TaskState): boolean {
  return FINAL_TASK_STATES.includes(state);
}

/**
 * The moves the task state machine allows, as the conditional updates of the tasks repository
 * make them (each names the states it leaves from): an attempt's start (RUNNING, also over a
 * RUNNING attempt lost without a word), an outcome from the lease holder (RETRY, COMPLETE,
 * ERROR, TIMEOUT), a last attempt lost (ERROR), a cancel, and the TTL sweep (EXPIRED, only
 * before the first start). A final state has no way out.
 */
export const TASK_TRANSITIONS: Readonly<Record<TaskState, readonly TaskState[]>> = {
  PENDING: ['RUNNING', 'ERROR', 'CANCELLED', 'EXPIRED'],
  RUNNING: ['RUNNING', 'RETRY', 'COMPLETE', 'ERROR', 'TIMEOUT', 'CANCELLED'],
  RETRY: ['RUNNING', 'RETRY', 'COMPLETE', 'ERROR', 'TIMEOUT', 'CANCELLED'],
  COMPLETE: [],
  ERROR: [],
  CANCELLED: [],
  EXPIRED: [],
  TIMEOUT: [],
};

/** Whether the state machine moves a task from `from` to `to`. */
export function canMove(from: TaskState, to: TaskState): boolean {
  return TASK_TRANSITIONS[from].includes(to);
}
