import type { TaskFailureCause } from '#tern/contracts';

/** Back-off before the next attempt: 1 s after the first failure, then 2, 4 ... capped at 60 s. */
export function retryDelayMs(attempt: number): number {
  return Math.min(60_000, 1000 * 2 ** Math.max(0, attempt - 1));
}

/** Whether a failed attempt is retried: the task runs at most maxRetries + 1 times, whatever the cause. */
export function willRetry(attempt: number, maxRetries: number): boolean {
  return attempt <= maxRetries;
}

/**
 * A delivery beyond the last allowed attempt means the previous one never reported: its
 * container or agent was lost while running it. It is recorded as that attempt's failure.
 */
export function lostLastAttempt(attempt: number, maxRetries: number): boolean {
  return attempt > maxRetries + 1;
}

export function failureCause(kind: 'error' | 'gone' | 'timeout'): TaskFailureCause {
  return kind === 'gone' ? 'container-lost' : kind;
}
