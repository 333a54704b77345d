import { addAt, type Decayed, valueAt } from './decay.js';
import { type ReputationParams, smoothedRate } from './params.js';

/** Heartbeat punctuality so far: beats expected and beats that came on time, decayed. */
export interface HeartbeatRecord {
  readonly expected: Decayed;
  readonly onTime: Decayed;
  /** The last beat seen: its sequence and when it arrived (epoch ms). */
  readonly lastSequence: number | null;
  readonly lastArrival: number | null;
}

export const EMPTY_HEARTBEATS: HeartbeatRecord = {
  expected: { v: 0, at: 0 },
  onTime: { v: 0, at: 0 },
  lastSequence: null,
  lastArrival: null,
};

/** A beat arrives late when the gap since the previous one exceeds the interval by half. */
const LATE_FACTOR = 1.5;

/** A lower sequence within this share of an interval after the last beat counted is a late delivery. */
const REORDER_MS_FACTOR = 0.5;

/**
 * Times (epoch ms, from, to) in which the service judging the beats could not hear them: beats
 * travel on core NATS, so one sent while no replica listened (the service down, or cut from
 * NATS) is lost, not late.
 */
export type DeafSpan = readonly [from: number, to: number];

/** How much of the gap from `from` to `to` falls in the deaf spans. */
function unheardWithin(from: number, to: number, deaf: readonly DeafSpan[]): number {
  let unheard = 0;
  for (const [a, b] of deaf) unheard += Math.max(0, Math.min(b, to) - Math.max(a, from));
  return unheard;
}

/**
 * Counts one heartbeat. Beats skipped by the agent (its sequence jumped) were expected and did
 * not come; a beat whose gap to the previous exceeds 1.5 intervals came late. A sequence that
 * goes back means the agent restarted: the gap across a restart is downtime, which uptime
 * judges, so it is not held against punctuality. A repeat (the same sequence, e.g. a
 * redelivery) is ignored, and so is a beat that arrived before the last one counted.
 * Keepalives (sequence 0) count as on time.
 *
 * The service's own deafness is skipped: the part of the gap inside `deaf` is taken out of it,
 * and so are the beats the agent sent in that part (one an interval), so a service that was down
 * (or a replica cut from NATS) holds neither its silence nor the beats it lost against machines;
 * what remains of the gap on either side is judged as ever.
 */
export function recordHeartbeat(
  h: HeartbeatRecord,
  sequence: number,
  arrival: number,
  params: ReputationParams,
  deaf: readonly DeafSpan[] = [],
): HeartbeatRecord {
  const hl = params.halfLifeMs;
  // A keepalive has no sequence of its own: counted on time, and it must not reset the agent's.
  if (sequence === 0) return { ...h, expected: addAt(h.expected, 1, arrival, hl), onTime: addAt(h.onTime, 1, arrival, hl) };
  // Older than the beat counted last: delivered late (replicas share the beats, so one may
  // store a newer beat first), and a restart's first beat arrives after the last one anyway.
  if (h.lastArrival !== null && arrival < h.lastArrival) return h;
  // A lower sequence soon after the last beat counted is the same kind of late delivery, not a
  // restart: each replica stamps a beat when its own event loop takes it, so under load beat n
  // may be stamped by one replica after beat n + 1 by another (test/reputation: two replicas
  // left a machine at sequence 29 of 30). An agent that restarts that fast has its first beat
  // ignored and the next one, an interval later, counted as the restart.
  if (
    h.lastArrival !== null &&
    h.lastSequence !== null &&
    sequence < h.lastSequence &&
    arrival - h.lastArrival < REORDER_MS_FACTOR * params.heartbeatIntervalMs
  )
    return h;
  const restarted = h.lastSequence === null || sequence < h.lastSequence;
  if (!restarted && sequence === h.lastSequence) return h;
  let expected = 1;
  let onTime = 1;
  if (!restarted && h.lastArrival !== null) {
    const unheard = unheardWithin(h.lastArrival, arrival, deaf);
    // Rounded up: a beat at either edge of a span is the service's loss, not the machine's.
    const lost = Math.ceil(unheard / params.heartbeatIntervalMs);
    const skipped = Math.max(0, sequence - (h.lastSequence ?? sequence) - 1 - lost);
    expected += skipped;
    if (arrival - h.lastArrival - unheard > LATE_FACTOR * params.heartbeatIntervalMs * (skipped + 1)) onTime = 0;
  }
  return {
    expected: addAt(h.expected, expected, arrival, hl),
    onTime: addAt(h.onTime, onTime, arrival, hl),
    lastSequence: sequence,
    lastArrival: arrival,
  };
}

/** Beta-smoothed share of expected beats that came on time. */
export function punctuality(h: HeartbeatRecord, now: number, params: ReputationParams): number {
  const expected = valueAt(h.expected, now, params.halfLifeMs);
  return smoothedRate(valueAt(h.onTime, now, params.halfLifeMs), expected, params);
}
