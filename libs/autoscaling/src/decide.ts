import type { ScalingMemory } from './memory.js';
import type { ContainerObservation, Observation, ScalingPolicy } from './observation.js';
import { clamp, policyTarget } from './policies.js';

export interface Decision {
  /** Containers the version should run. */
  readonly desired: number;
  /** Ready containers idle past keep-warm, oldest idle first: the only ones the scheduler may stop. */
  readonly idleContainers: readonly string[];
  /** One line a user can read. */
  readonly reason: string;
  /** desired or idleContainers differ from the previous decision (always true for the first). */
  readonly changed: boolean;
  /** What the policy alone asked for, clamped to [min, max]. */
  readonly target: number;
  /** Epoch ms of the decision. */
  readonly decidedAt: number;
}

export interface ScaleState {
  readonly policy: ScalingPolicy;
  /** The last decision for this version; none on the first tick or after a restart. */
  readonly previous?: Decision;
  /**
   * What this version's scaling has learned (arrival rates, service time, cold start, bursts);
   * observed and updated by every decide(). Needed by the predictive policy, which without it
   * scales on the demand of the tick alone. Keep one per version for the process's life.
   */
  readonly memory?: ScalingMemory;
}

/**
 * One control step for a deployment version.
 *
 * Anti-flap rule (a hysteresis by time): scale up at once to what the policy asks; scale down
 * only by containers that have been idle longer than keep_warm_seconds. A container that served
 * a request within keep-warm is never given up, so a load that wobbles around a container
 * boundary keeps its containers instead of stopping and restarting them (a GPU cold start costs
 * far more than a warm idle minute). Besides that: never below the busy containers, never below
 * min, never above max (max always wins). With no previous decision (first tick, a restarted or
 * new leader), the ready containers are the baseline, so a restart never drops warm containers.
 *
 * Slots asked for but not yet ready: without a memory they have nothing warm to lose and are
 * given back as soon as the target drops. With a memory (the autoscaler keeps one per version)
 * nothing at all is given back until the target has stayed below the desired count for
 * keep_warm_seconds: a target that wobbles across a boundary while containers start would
 * otherwise cancel a start and ask for it again a second later (each time paying a cold start).
 * The predictive policy adds its own stable window on top (its steady ask follows the arrival
 * rate over 60 s, and a burst's panic ask holds until the burst is over).
 */
export function decide(state: ScaleState, observation: Observation, now: number): Decision {
  const { policy, previous, memory } = state;
  const ready = observation.containers;
  const before = previous?.desired ?? ready.length;
  memory?.observe(observation, now, policy);
  const asked = policyTarget(policy, observation, memory, now);
  const target = clamp(policy, asked.containers);
  const removable = idlePastKeepWarm(ready, policy.keepWarmSeconds);
  const busy = ready.filter((c) => c.inFlight > 0).length;

  let desired: number;
  let reason: string;
  if (target >= before) {
    if (memory) memory.lowSince = undefined;
    desired = target;
    reason = `${target > before ? 'scale up' : 'steady'}: ${asked.reason}${bounds(policy, asked.containers)}`;
  } else {
    // Ready containers we may not give up yet, plus any the policy or busyness still needs.
    // With a memory, nothing is given back until the target has been low for keep-warm.
    if (memory) memory.lowSince ??= now;
    const settling = memory !== undefined && now - memory.lowSince! < policy.keepWarmSeconds * 1000;
    const keep = settling ? before : Math.min(before, ready.length) - removable.length;
    desired = Math.min(policy.maxContainers, before, Math.max(target, busy, keep));
    reason =
      desired < before
        ? `scale down: ${asked.reason}${bounds(policy, asked.containers)}; ${removable.length} idle past keep-warm ${policy.keepWarmSeconds} s`
        : `holding ${desired}: ${asked.reason}${bounds(policy, asked.containers)}, but containers were busy within keep-warm ${policy.keepWarmSeconds} s`;
  }
  const idleContainers = removable.map((c) => c.containerId);
  memory?.decided(desired, ready.length, now);
  return { desired, idleContainers, reason, target, decidedAt: now, changed: differs(previous, desired, idleContainers) };
}

/**
 * A stopped or removed version: nothing should run. Every container not serving a request is
 * listed (keep-warm means nothing once the user stopped it); busy ones follow when they finish.
 */
export function decideStopped(previous: Decision | undefined, observation: Observation, why: string, now: number): Decision {
  const idleContainers = [...observation.containers]
    .filter((c) => c.inFlight === 0)
    .sort((a, b) => b.idleSeconds - a.idleSeconds)
    .map((c) => c.containerId);
  return { desired: 0, idleContainers, reason: why, target: 0, decidedAt: now, changed: differs(previous, 0, idleContainers) };
}

/** Containers with no request idle longer than keep-warm, oldest idle first (stopped first). */
export function idlePastKeepWarm(containers: readonly ContainerObservation[], keepWarmSeconds: number): ContainerObservation[] {
  return containers
    .filter((c) => c.inFlight === 0 && c.idleSeconds > keepWarmSeconds)
    .sort((a, b) => b.idleSeconds - a.idleSeconds || a.containerId.localeCompare(b.containerId));
}

function bounds(policy: ScalingPolicy, asked: number): string {
  if (asked > policy.maxContainers) return ` (capped at max_containers ${policy.maxContainers})`;
  if (asked < policy.minContainers) return ` (min_containers ${policy.minContainers})`;
  return '';
}

function differs(previous: Decision | undefined, desired: number, idle: readonly string[]): boolean {
  if (!previous) return true;
  if (previous.desired !== desired || previous.idleContainers.length !== idle.length) return true;
  return idle.some((id, i) => previous.idleContainers[i] !== id);
}
