import { type ReputationParams } from './params.js';

/** The control plane's latest measurement of a machine's network, as the score needs it. */
export interface NetworkRecord {
  /** The slower leg (NATS or HTTP): what the machine can be relied on for. */
  readonly throughputMbps: number;
  readonly latencyMs: number;
  readonly failed: boolean;
  readonly testedAt: number;
}

/**
 * 0.7 × throughput part + 0.3 × latency part. Throughput: sqrt(slower leg / reference), capped
 * at 1 (a tenth of the reference still earns 0.32: slow links are usable, just less so).
 * Latency: reference / round trip, capped at 1. A failed measurement scores 0. With none, the
 * component is no part of the score (see scoreMachines).
 */
export function networkComponent(n: NetworkRecord, params: ReputationParams): number {
  if (n.failed) return 0;
  const throughput = Math.min(1, Math.sqrt(Math.max(0, n.throughputMbps) / params.networkReferenceMbps));
  const latency = n.latencyMs <= params.networkReferenceLatencyMs ? 1 : params.networkReferenceLatencyMs / n.latencyMs;
  return 0.7 * throughput + 0.3 * latency;
}
