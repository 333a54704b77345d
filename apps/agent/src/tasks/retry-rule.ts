/**
 * The back-off before a task's next attempt is messaging's retryDelayMs (1 s after the first
 * failure, then 2, 4 ... capped at 60 s), the same as any JetStream handler's.
 */

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
