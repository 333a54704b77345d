/** What the autoscaler knows about one deployment version at a tick, summed over every gateway. */
export interface ContainerObservation {
  readonly containerId: string;
  /** Requests inside it now (summed over gateways). */
  readonly inFlight: number;
  /** Seconds since its last request finished (0 while busy); the least any gateway reports. */
  readonly idleSeconds: number;
  /**
   * The load its own server last reported (concurrency policy's target_load: queued tokens,
   * waiting requests, …); absent when it reported none lately. Only ever used to size its own
   * deployment version, and bounded there (REPORTED_LOAD_CAP).
   */
  readonly load?: number;
}

export interface Observation {
  /** Requests inside containers now. */
  readonly inFlight: number;
  /** Requests held by gateways because no container had room. */
  readonly buffered: number;
  /** Mean time a request spends in a container (0 when unknown), for request_latency. */
  readonly meanDurationMs: number;
  /** Ready containers the gateways route to. */
  readonly containers: readonly ContainerObservation[];
  /**
   * Requests or tasks that arrived since the previous tick, when the caller counts them
   * (submitted tasks, requests received). Undefined when unknown: the predictive policy then
   * infers arrivals from the change in demand and the completions the mean duration implies.
   */
  readonly arrived?: number;
}

/** Requests that need a container now: running plus waiting. */
export function demand(o: Observation): number {
  return Math.max(0, o.inFlight) + Math.max(0, o.buffered);
}

/** What a policy asks for before the scale-down rule and the clamp, with a line saying why. */
export interface Target {
  readonly containers: number;
  readonly reason: string;
}

export const EMPTY_OBSERVATION: Observation = { inFlight: 0, buffered: 0, meanDurationMs: 0, containers: [] };

export type ScalingPolicyType = 'queue_depth' | 'request_latency' | 'predictive' | 'concurrency';

/** The parts of a resolved spec the policy reads (ResolvedSpec.autoscaler plus keep-warm). */
export interface ScalingPolicy {
  readonly type: ScalingPolicyType;
  readonly minContainers: number;
  readonly maxContainers: number;
  /** queue_depth: load one container should carry (workers × concurrent_requests by default). */
  readonly tasksPerContainer: number;
  /** request_latency: the wait a request should not exceed; predictive: the wait a queued task should not exceed. */
  readonly desiredLatencySeconds?: number;
  /** predictive: share of a container's workers the arrival rate should keep busy (headroom); default 0.8. */
  readonly targetUtilization?: number;
  /** predictive: the long moving-average window of the arrival rate, in seconds; default 60. */
  readonly stableWindowSeconds?: number;
  /** predictive: the short window that detects bursts (panic mode), in seconds; default 6. */
  readonly panicWindowSeconds?: number;
  /** predictive: start containers ahead of bursts that recur with a stable period; default true. */
  readonly prewarm?: boolean;
  /** concurrency: in-flight requests one container should carry (Knative's target, Modal's target_inputs). */
  readonly targetConcurrency?: number;
  /** concurrency: the server-reported load one container should carry; absent: scale on requests alone. */
  readonly targetLoad?: number;
  readonly keepWarmSeconds: number;
}

/** The scaling inputs of a version's resolved spec (structurally ResolvedSpec, kept import-free). */
export interface SpecScaling {
  readonly keepWarmSeconds: number;
  readonly autoscaler: Omit<ScalingPolicy, 'keepWarmSeconds'>;
}

/**
 * The policy a version runs under. Only the latest version keeps a warm pool: older ones serve
 * pinned `/v<N>` traffic and may go to zero whatever their min_containers says.
 */
export function policyFor(spec: SpecScaling, latest: boolean): ScalingPolicy {
  const a = spec.autoscaler;
  return {
    type: a.type,
    minContainers: latest ? a.minContainers : 0,
    maxContainers: a.maxContainers,
    tasksPerContainer: a.tasksPerContainer,
    desiredLatencySeconds: a.desiredLatencySeconds,
    ...(a.type === 'predictive'
      ? {
          targetUtilization: a.targetUtilization,
          stableWindowSeconds: a.stableWindowSeconds,
          panicWindowSeconds: a.panicWindowSeconds,
          prewarm: a.prewarm,
        }
      : {}),
    ...(a.type === 'concurrency' ? { targetConcurrency: a.targetConcurrency, targetLoad: a.targetLoad } : {}),
    keepWarmSeconds: spec.keepWarmSeconds,
  };
}
