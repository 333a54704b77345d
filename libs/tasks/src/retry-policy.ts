import { MAX_TASK_RETRIES, type TaskFailureCause, type TaskState } from '#tern/contracts';
import { backoffMs, type BackoffShape, DEFAULT_BACKOFF } from '#tern/timing';

/**
 * Where a failed task's next attempt is decided. A task's retry policy is compiled once, from
 * its deployment's task_policy with the submit's overrides (the max_retries its TASKS message
 * carries), into one value; the agent asks it after every failed attempt, and JetStream's
 * delivery count is the attempt.
 */
export interface TaskRetryPolicy {
  /** Attempts after the first. */
  readonly maxRetries: number;
  /** The task runs at most this many times, whatever the causes of its failures. */
  readonly maxAttempts: number;
  /** The wait before the attempt after a failed one: 1 s after the first failure, then 2, 4 … at most 60 s. */
  readonly backoff: BackoffShape;
  /**
   * When the next attempt may start, per cause: after the back-off for a handler's error or a
   * timeout (the same input may fail the same way at once), at once for a lost container (the
   * input is not to blame; another container runs it).
   */
  readonly waitAfter: Readonly<Record<TaskFailureCause, 'backoff' | 'none'>>;
}

/** What follows a failed attempt: another after delayMs, or none (the task ends ERROR or TIMEOUT). */
export type RetryDecision = { retry: true; delayMs: number } | { retry: false };

const WAIT_AFTER: TaskRetryPolicy['waitAfter'] = { error: 'backoff', timeout: 'backoff', 'container-lost': 'none' };

/**
 * A task's retry policy from its task_policy as resolved (defaults filled, overrides applied).
 * Throws for max_retries outside 0…MAX_TASK_RETRIES: the spec and the TASKS message are validated
 * against the same bound, so this is a bug, never a user's input.
 */
export function compileRetryPolicy(policy: { readonly maxRetries: number }): TaskRetryPolicy {
  const { maxRetries } = policy;
  if (!Number.isInteger(maxRetries) || maxRetries < 0 || maxRetries > MAX_TASK_RETRIES)
    throw new RangeError(`max_retries must be a whole number from 0 to ${MAX_TASK_RETRIES}, not ${maxRetries}`);
  return Object.freeze({ maxRetries, maxAttempts: maxRetries + 1, backoff: DEFAULT_BACKOFF, waitAfter: WAIT_AFTER });
}

/** Whether attempt `attempt` (1 the first) that failed of `cause` is followed by another, and when. */
export function afterFailure(policy: TaskRetryPolicy, attempt: number, cause: TaskFailureCause): RetryDecision {
  if (attempt >= policy.maxAttempts) return { retry: false };
  return { retry: true, delayMs: policy.waitAfter[cause] === 'none' ? 0 : backoffMs(Math.max(1, attempt), policy.backoff) };
}

/**
 * A delivery beyond the last allowed attempt means the previous one never reported: its
 * container or agent was lost while running it. It is recorded as that attempt's failure, and
 * the task runs no more.
 */
export function isPastLastAttempt(policy: TaskRetryPolicy, delivery: number): boolean {
  return delivery > policy.maxAttempts;
}

/** The state a task ends in when its last attempt failed of `cause`. */
export function finalStateAfter(cause: TaskFailureCause): Extract<TaskState, 'ERROR' | 'TIMEOUT'> {
  return cause === 'timeout' ? 'TIMEOUT' : 'ERROR';
}

/**
 * The deliveries JetStream allows a task before it stops handing it out: a backstop above the
 * highest allowed (MAX_TASK_RETRIES + 1 attempts, and the delivery after the last that reports
 * it lost), since each task's own bound is kept by its policy, not by the consumer.
 */
export const TASK_MAX_DELIVER = MAX_TASK_RETRIES + 2;
