import { addAt, type Decayed, valueAt } from './decay.js';
import { neutral, type ReputationParams } from './params.js';

/** Container start latencies as a decayed mean: a sum and a weight that fade together. */
export interface LatencyRecord {
  readonly sumMs: Decayed;
  readonly weight: Decayed;
}

export function recordLatency(l: LatencyRecord | null, latencyMs: number, at: number, params: ReputationParams): LatencyRecord {
  return { sumMs: addAt(l?.sumMs, latencyMs, at, params.halfLifeMs), weight: addAt(l?.weight, 1, at, params.halfLifeMs) };
}

export function meanLatency(l: LatencyRecord | null, now: number, params: ReputationParams): { meanMs: number; weight: number } | null {
  if (!l) return null;
  const weight = valueAt(l.weight, now, params.halfLifeMs);
  if (weight <= 1e-9) return null;
  return { meanMs: valueAt(l.sumMs, now, params.halfLifeMs) / weight, weight };
}

export function median(values: readonly number[]): number | null {
  if (!values.length) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** Pseudo-starts at the neutral value, so one slow start does not sink a new machine. */
const LATENCY_PRIOR_WEIGHT = 2;

/**
 * Start latency against the pool: the pool median of the machines' mean latencies over this
 * machine's mean, capped at 1 (as fast as the median or faster is full marks; twice as slow,
 * 0.5), then pulled toward the neutral value with LATENCY_PRIOR_WEIGHT pseudo-starts.
 */
export function latencyComponent(
  mine: { meanMs: number; weight: number } | null,
  poolMedianMs: number | null,
  params: ReputationParams,
): number {
  const prior = neutral(params);
  if (!mine || poolMedianMs === null) return prior;
  const raw = mine.meanMs <= 0 ? 1 : Math.min(1, poolMedianMs / mine.meanMs);
  return (mine.weight * raw + LATENCY_PRIOR_WEIGHT * prior) / (mine.weight + LATENCY_PRIOR_WEIGHT);
}
