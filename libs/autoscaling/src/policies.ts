import type { ScalingMemory } from './memory.js';
import { demand, type Observation, type ScalingPolicy, type Target } from './observation.js';
import { concurrencyTarget } from './concurrency.js';
import { predictiveTarget } from './predictive.js';

/** queue_depth (Beam's QueueDepthAutoscaler): one container per tasksPerContainer requests. */
export function queueDepthTarget(policy: ScalingPolicy, o: Observation): Target {
  const perContainer = Math.max(1, Math.floor(policy.tasksPerContainer));
  const load = demand(o);
  const containers = Math.ceil(load / perContainer);
  return { containers, reason: `load ${load} / ${perContainer} per container → ${containers}` };
}

/**
 * request_latency (Beam's RequestLatencyAutoscaler): enough containers that the requests
 * waiting, at the mean duration, finish within desired latency. Never more containers than
 * requests: a container with nothing to do does not lower anyone's latency. Without a
 * measured duration yet, one container per request keeps the latency promise.
 */
export function requestLatencyTarget(policy: ScalingPolicy, o: Observation): Target {
  const load = demand(o);
  if (load === 0) return { containers: 0, reason: 'no requests' };
  const latency = Math.max(0.001, policy.desiredLatencySeconds ?? 1);
  const meanSeconds = Math.max(0, o.meanDurationMs) / 1000;
  if (meanSeconds === 0) return { containers: load, reason: `load ${load}, no duration measured yet → ${load}` };
  const wanted = Math.max(1, Math.ceil((meanSeconds * load) / latency));
  const containers = Math.min(load, wanted);
  return {
    containers,
    reason: `${meanSeconds.toFixed(2)} s × ${load} requests / ${latency} s desired latency → ${containers}`,
  };
}

/** The policy's ask; the predictive one reads (and holds its panic ask in) the version's memory. */
export function policyTarget(policy: ScalingPolicy, o: Observation, memory?: ScalingMemory, now = 0): Target {
  if (policy.type === 'request_latency') return requestLatencyTarget(policy, o);
  if (policy.type === 'predictive') return predictiveTarget(policy, o, memory, now);
  if (policy.type === 'concurrency') return concurrencyTarget(policy, o);
  return queueDepthTarget(policy, o);
}

/** Clamps to [min, max]; when a spec would have min above max, max wins. */
export function clamp(policy: ScalingPolicy, containers: number): number {
  const max = Math.max(0, policy.maxContainers);
  return Math.min(max, Math.max(policy.minContainers, containers));
}
