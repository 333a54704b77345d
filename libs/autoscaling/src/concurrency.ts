import { demand, type Observation, type ScalingPolicy, type Target } from './observation.js';

/**
 * The most load one container's report may count for. A server's word only sizes its own
 * version (never past max_containers), so the cap is there to keep sums finite, not to judge it.
 */
export const REPORTED_LOAD_CAP = 1_000_000;

/** A reported load as the policy counts it: undefined for nothing usable (missing, non-finite, negative), else capped. */
export function usableLoad(load: number | undefined): number | undefined {
  if (load === undefined || !Number.isFinite(load) || load < 0) return undefined;
  return Math.min(load, REPORTED_LOAD_CAP);
}

/**
 * concurrency (Knative's concurrency target, Modal's target inputs): one container per
 * targetConcurrency requests in flight or waiting. With targetLoad, also one per targetLoad of
 * the load the containers' own servers report (vLLM's waiting requests, queued tokens, …), and
 * the larger ask wins. Containers that reported nothing usable count for nothing on the load
 * side; the request side still sees their requests, so a server that stops reporting (or never
 * did) is scaled as if it had no load_path, and requests waiting at zero containers still start one.
 */
export function concurrencyTarget(policy: ScalingPolicy, o: Observation): Target {
  const perContainer = Math.max(1, Math.floor(policy.targetConcurrency ?? policy.tasksPerContainer));
  const requests = demand(o);
  const byRequests = Math.ceil(requests / perContainer);
  const requestReason = `${requests} requests / ${perContainer} per container → ${byRequests}`;
  if (policy.targetLoad === undefined) return { containers: byRequests, reason: requestReason };

  const perContainerLoad = Math.max(Number.EPSILON, policy.targetLoad);
  const loads = o.containers.map((c) => usableLoad(c.load)).filter((l): l is number => l !== undefined);
  const total = loads.reduce((sum, l) => sum + l, 0);
  const byLoad = Math.ceil(total / perContainerLoad);
  const loadReason = `reported load ${round(total)} / ${policy.targetLoad} per container → ${byLoad} (${loads.length} of ${o.containers.length} containers reported)`;
  return byLoad > byRequests
    ? { containers: byLoad, reason: `${loadReason}; ${requestReason}` }
    : { containers: byRequests, reason: `${requestReason}; ${loadReason}` };
}

function round(n: number): number {
  return Math.round(n * 100) / 100;
}
