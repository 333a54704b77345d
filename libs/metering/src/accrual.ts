import { hourFloor, splitAtHours, type UsageSlice } from './intervals.js';

/**
 * What metering knows of one container. Its start comes from `container.started`, its end
 * from whichever ending event says the earliest time; both may arrive in any order, on
 * separate consumers, so every rule here is a pure function of the set of events seen.
 */
export interface ContainerSpan {
  /** Epoch ms; null until `container.started` is seen. */
  readonly startedAt: number | null;
  /** Epoch ms; null while it runs. */
  readonly endedAt: number | null;
}

/** How a container's usage ends, by the event that ended it. */
export type EndingEvent =
  | { readonly kind: 'stopped'; readonly at: number }
  | { readonly kind: 'crashed'; readonly at: number }
  | { readonly kind: 'machine-lost'; readonly at: number; readonly heartbeatTtlSeconds: number };

/**
 * When usage ends for an ending event. A stop or a crash ends it when the agent says. A lost
 * machine is noticed only after MACHINE_HEARTBEAT_TTL_SECONDS of silence, so its containers
 * are closed at the machine's last heartbeat (the time the scheduler gave up, less the TTL):
 * the last moment anyone knew they ran. Users are not billed, nor owners paid, for the silence.
 */
export function endOfUsage(event: EndingEvent): number {
  return event.kind === 'machine-lost' ? event.at - event.heartbeatTtlSeconds * 1000 : event.at;
}

/**
 * What the control plane observed of a container's life bounds what its machine says of it: no
 * usage before the scheduler placed it, and no start or end after the event saying so reached
 * NATS (its stored time: the latest sign of life the claim can stand on). A machine may report
 * late or with a skewed clock, never stretch its paid time past what was seen.
 */
export function observedStart(claimed: number, bounds: { placedAt: number; storedAt: number }): number {
  return Math.min(Math.max(claimed, bounds.placedAt), bounds.storedAt);
}

/** Likewise an end: not after its event reached NATS, nor before the placement. */
export function observedEnd(claimed: number, bounds: { placedAt: number; storedAt: number }): number {
  return Math.max(Math.min(claimed, bounds.storedAt), bounds.placedAt);
}

/** Several ending events: the earliest wins, whatever order they are seen in. */
export function earliestEnd(current: number | null, candidate: number): number {
  return current === null ? candidate : Math.min(current, candidate);
}

/** Likewise a start seen twice (a redelivery with a different clock reading) keeps the earliest. */
export function earliestStart(current: number | null, candidate: number): number {
  return current === null ? candidate : Math.min(current, candidate);
}

/**
 * Every slice of a closed container: the final record. Empty when it never started or ended
 * before it started (a skewed clock).
 */
export function closedSlices(span: ContainerSpan): UsageSlice[] {
  if (span.startedAt === null || span.endedAt === null) return [];
  return splitAtHours(span.startedAt, span.endedAt);
}

/**
 * The slices a checkpoint at `now` writes for a running container, given how far the last
 * checkpoint got (`accruedTo`). Hours before the one the last checkpoint reached are already
 * complete in the store, so only the rest is written again: a container running for a month
 * costs one or two rows per checkpoint, not 720. Nothing when `now` is before the start
 * (the agent's clock ahead of metering's).
 */
export function checkpointSlices(startedAt: number, accruedTo: number | null, now: number): UsageSlice[] {
  const from = accruedTo === null ? startedAt : Math.max(startedAt, hourFloor(accruedTo));
  return splitAtHours(from, now);
}
