import { type Decision, decide } from '../decide.js';
import { ScalingMemory } from '../memory.js';
import type { ScalingPolicy } from '../observation.js';
import { SimulatedCluster } from './cluster.js';
import type { Trace } from './traces.js';

export interface SimulationOptions {
  /** Seconds from asking for a container until it takes tasks (a GPU container loading a model: ~20 s). */
  readonly coldStartSeconds?: number;
  /** Tasks one container runs at once. */
  readonly workers?: number;
  /** A task that waits longer than this before it starts misses the latency target. */
  readonly latencyTargetSeconds?: number;
  /** Give the policy a ScalingMemory (as the autoscaler does); false simulates a memory lost every tick. */
  readonly memory?: boolean;
  /** Report arrivals per tick in the observation (task queues can); false makes the memory infer them. */
  readonly reportArrivals?: boolean;
  /** Seconds to keep going after the trace for the queue to drain and containers to go. */
  readonly maxDrainSeconds?: number;
}

export const DEFAULT_SIMULATION: Required<SimulationOptions> = {
  coldStartSeconds: 20,
  workers: 4,
  latencyTargetSeconds: 10,
  memory: true,
  reportArrivals: true,
  maxDrainSeconds: 3600,
};

/** One tick as the cluster stood after the decision. */
export interface TickRecord {
  readonly t: number;
  readonly desired: number;
  readonly ready: number;
  readonly starting: number;
  readonly inFlight: number;
  readonly buffered: number;
  readonly reason: string;
}

export interface SimulationResult {
  readonly trace: string;
  readonly policy: string;
  readonly tasks: number;
  /** Seconds each task waited before it started, in arrival order (to the end for any never started). */
  readonly waits: readonly number[];
  readonly unstarted: number;
  readonly p50Wait: number;
  readonly p95Wait: number;
  /** Share of tasks that started within the latency target (0..1). */
  readonly withinTarget: number;
  /** Seconds containers existed, cold start included (what a GPU bills). */
  readonly containerSeconds: number;
  /** Decisions whose desired count differed from the one before. */
  readonly scaleEvents: number;
  readonly peakContainers: number;
  /** Seconds simulated (the trace plus its drain). */
  readonly seconds: number;
  readonly ticks: readonly TickRecord[];
}

/**
 * Replays a trace against a policy in 1-second ticks. Between ticks, in continuous time: tasks
 * arrive into a FIFO queue and start on the ready container with the fewest tasks (as the
 * gateway routes); containers become ready a cold start after they were asked for. At each tick
 * it builds the Observation the autoscaler builds, calls the real decide(), and reconciles as
 * the scheduler does: start containers up to desired; above it, stop containers not yet ready
 * first, then those decide() named idle. Deterministic: the trace holds every random draw.
 */
export function simulate(trace: Trace, policy: ScalingPolicy, options: SimulationOptions = {}): SimulationResult {
  const o = { ...DEFAULT_SIMULATION, ...options };
  const cluster = new SimulatedCluster(trace.tasks, o);
  const memory = o.memory ? new ScalingMemory() : undefined;
  const ticks: TickRecord[] = [];
  let arrivedIndex = 0;
  let scaleEvents = 0;
  let peak = 0;
  let previous: Decision | undefined;
  let t = 0;
  for (; t <= trace.seconds + o.maxDrainSeconds; t++) {
    cluster.advance(t);
    const arrived = cluster.arrived - arrivedIndex;
    arrivedIndex = cluster.arrived;
    const observation = cluster.observe(t, o.reportArrivals ? arrived : undefined);
    const d = decide({ policy, previous, memory }, observation, t * 1000);
    if (d.desired !== (previous?.desired ?? 0)) scaleEvents++;
    previous = d;
    cluster.reconcile(d, t);
    peak = Math.max(peak, cluster.size);
    ticks.push({
      t,
      desired: d.desired,
      ...cluster.counts(),
      inFlight: observation.inFlight,
      buffered: observation.buffered,
      reason: d.reason,
    });
    if (t >= trace.seconds && cluster.drained) break;
  }
  const end = Math.min(t, trace.seconds + o.maxDrainSeconds);
  const { waits, unstarted } = cluster.finish(end);
  const sorted = [...waits].sort((a, b) => a - b);
  const tasks = trace.tasks.length;
  return {
    trace: trace.name,
    policy: policy.type,
    tasks,
    waits,
    unstarted,
    p50Wait: quantile(sorted, 0.5),
    p95Wait: quantile(sorted, 0.95),
    withinTarget: tasks ? waits.filter((w) => w <= o.latencyTargetSeconds).length / tasks : 1,
    containerSeconds: cluster.containerSeconds,
    scaleEvents,
    peakContainers: peak,
    seconds: end,
    ticks,
  };
}

/** The q-quantile of sorted values (nearest rank); 0 for none. */
export function quantile(sorted: readonly number[], q: number): number {
  if (!sorted.length) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}
