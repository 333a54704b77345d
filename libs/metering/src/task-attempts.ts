/**
 * A task attempt's times as the control plane believes them. The start is the lease: when the
 * control plane saw the attempt start (its task.started reached NATS), whatever the agent says.
 * The agent's end and duration are claims, kept only within what was observed: an end no later
 * than when its outcome reached NATS and no earlier than the start, a duration no longer than
 * the time between. Times are epoch milliseconds.
 */
export interface AttemptClaim {
  /** When the attempt's start was observed; null when it never was (no time ran on record). */
  readonly startedAt: number | null;
  /** When the outcome reached NATS. */
  readonly observedAt: number;
  /** The agent's end (NaN when unreadable). */
  readonly claimedEndedAt: number;
  readonly claimedDurationMs?: number;
}

export interface BoundAttempt {
  readonly endedAt: number;
  /** Absent when no start was observed. */
  readonly durationMs?: number;
}

export function boundAttempt(a: AttemptClaim): BoundAttempt {
  const claimed = Number.isFinite(a.claimedEndedAt) ? a.claimedEndedAt : a.observedAt;
  let endedAt = Math.min(claimed, a.observedAt);
  if (a.startedAt === null) return { endedAt };
  endedAt = Math.max(endedAt, a.startedAt);
  const observed = endedAt - a.startedAt;
  const durationMs = Math.round(Math.max(0, Math.min(a.claimedDurationMs ?? observed, observed)));
  return { endedAt, durationMs };
}
