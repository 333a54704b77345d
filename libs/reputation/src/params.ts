/** Every tunable of the score in one place; docs/architecture.md (Reputation, Scoring) documents the defaults. */
export interface ReputationParams {
  /** Counts of outcomes, heartbeats and latencies halve every this long: old failures fade. */
  readonly halfLifeMs: number;
  /** How often agents heartbeat (MACHINE_HEARTBEAT_INTERVAL_SECONDS). */
  readonly heartbeatIntervalMs: number;
  /**
   * The Beta prior every rate starts from: `alpha` pseudo-successes and `beta` pseudo-failures.
   * A machine with no record scores alpha / (alpha + beta), never 0 or 1. Few pseudo-counts
   * (alpha + beta = 2): the prior is a guess, and the machine's own record outweighs it after a
   * handful of observed outcomes (one start the machine failed takes its start rate from 0.9 to 0.6).
   */
  readonly prior: { readonly alpha: number; readonly beta: number };
  /**
   * Observed outcomes (decayed container starts and task attempts the control plane saw end)
   * before a machine is `proven`; below, it is `unproven` and its score rests mostly on the prior.
   */
  readonly provenAfter: number;
  /**
   * Pseudo-observations of a machine's own error rate mixed into the baseline it is judged
   * against, so a deployment seen on few other machines cannot blame this one much.
   */
  readonly baselineStrength: number;
  /**
   * Weights of the components in the score; they sum to 1. A component with no evidence the
   * control plane gathered itself (network, until the control plane measures it) is left out and
   * the others' weights are scaled up to sum to 1.
   */
  readonly weights: Readonly<Record<WeightedComponent, number>>;
  /** Weights of the 1-, 7- and 30-day uptimes in the uptime component; they sum to 1. */
  readonly uptimeWeights: readonly [number, number, number];
  /** A network test at or above this throughput (slower leg) scores full marks on throughput. */
  readonly networkReferenceMbps: number;
  /** … and at or below this round trip, full marks on latency. */
  readonly networkReferenceLatencyMs: number;
}

export const WEIGHTED_COMPONENTS = ['uptime', 'taskSuccess', 'startSuccess', 'startLatency', 'heartbeat', 'network'] as const;
export type WeightedComponent = (typeof WEIGHTED_COMPONENTS)[number];

export const HOUR_MS = 3600_000;
export const DAY_MS = 24 * HOUR_MS;

export const DEFAULT_PARAMS: ReputationParams = {
  halfLifeMs: 3.5 * DAY_MS,
  heartbeatIntervalMs: 10_000,
  // Mean 0.9: a new machine is presumed good but not perfect, and can pass the usual minimum
  // (0.9) with a clean record on the rest, so it gets work and can earn a record at all; two
  // pseudo-counts only, so a first failure it owns takes it below that minimum.
  prior: { alpha: 1.8, beta: 0.2 },
  provenAfter: 5,
  baselineStrength: 2,
  weights: { uptime: 0.3, taskSuccess: 0.25, startSuccess: 0.15, startLatency: 0.1, heartbeat: 0.1, network: 0.1 },
  uptimeWeights: [0.5, 0.3, 0.2],
  networkReferenceMbps: 1000,
  networkReferenceLatencyMs: 50,
};

/** What a component with no evidence at all is worth: the prior's mean. */
export function neutral(params: ReputationParams): number {
  return params.prior.alpha / (params.prior.alpha + params.prior.beta);
}

/** Beta-smoothed success rate: (successes + alpha) / (trials + alpha + beta). */
export function smoothedRate(successes: number, trials: number, params: ReputationParams): number {
  const { alpha, beta } = params.prior;
  const s = Math.min(Math.max(successes, 0), Math.max(trials, 0));
  return (s + alpha) / (Math.max(trials, 0) + alpha + beta);
}
