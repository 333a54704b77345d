import { type Decision, decide } from '../decide.js';
import { ScalingMemory } from '../memory.js';
import type { ContainerObservation, Observation, ScalingPolicy } from '../observation.js';
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

interface Running {
  readonly task: number;
  readonly endsAt: number;
}

interface Container {
  readonly id: string;
  readonly startedAt: number;
  readonly readyAt: number;
  ready: boolean;
  running: Running[];
  /** When its last task finished (or when it became ready). */
  idleSince: number;
}

/** Durations the service averages for meanDurationMs: the last ones finished. */
const DURATIONS_AVERAGED = 50;

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
  const tasks = trace.tasks;
  const waits = new Array<number>(tasks.length).fill(NaN);
  const queue: number[] = [];
  let containers: Container[] = [];
  const durations: number[] = [];
  const memory = o.memory ? new ScalingMemory() : undefined;
  const ticks: TickRecord[] = [];
  let next = 0;
  let arrivedIndex = 0;
  let finished = 0;
  let containerSeconds = 0;
  let scaleEvents = 0;
  let peak = 0;
  let previous: Decision | undefined;
  let serial = 0;

  const dispatch = (at: number) => {
    while (queue.length) {
      let best: Container | undefined;
      for (const c of containers)
        if (c.ready && c.running.length < o.workers && (!best || c.running.length < best.running.length)) best = c;
      if (!best) return;
      const task = queue.shift()!;
      waits[task] = at - tasks[task].arrival;
      best.running.push({ task, endsAt: at + tasks[task].service });
    }
  };

  /** Processes every arrival, completion and readiness up to time `until`, in time order. */
  const advance = (until: number) => {
    for (;;) {
      let at = Infinity;
      let kind: 'arrival' | 'ready' | 'done' = 'arrival';
      let container: Container | undefined;
      if (next < tasks.length) at = tasks[next].arrival;
      for (const c of containers) {
        if (!c.ready && c.readyAt < at) [at, kind, container] = [c.readyAt, 'ready', c];
        for (const r of c.running) if (r.endsAt < at) [at, kind, container] = [r.endsAt, 'done', c];
      }
      if (at > until) return;
      if (kind === 'arrival') queue.push(next++);
      else if (kind === 'ready') {
        container!.ready = true;
        container!.idleSince = at;
      } else {
        const c = container!;
        const i = c.running.findIndex((r) => r.endsAt === at);
        const [r] = c.running.splice(i, 1);
        durations.push(tasks[r.task].service);
        if (durations.length > DURATIONS_AVERAGED) durations.shift();
        finished++;
        if (c.running.length === 0) c.idleSince = at;
      }
      dispatch(at);
    }
  };

  let t = 0;
  for (; t <= trace.seconds + o.maxDrainSeconds; t++) {
    advance(t);
    const ready = containers.filter((c) => c.ready);
    const inFlight = ready.reduce((n, c) => n + c.running.length, 0);
    const arrived = next - arrivedIndex;
    arrivedIndex = next;
    const observation: Observation = {
      inFlight,
      buffered: queue.length,
      meanDurationMs: durations.length ? (durations.reduce((a, b) => a + b, 0) / durations.length) * 1000 : 0,
      containers: ready.map((c): ContainerObservation => ({
        containerId: c.id,
        inFlight: c.running.length,
        idleSeconds: c.running.length ? 0 : t - c.idleSince,
      })),
      ...(o.reportArrivals ? { arrived } : {}),
    };
    const d = decide({ policy, previous, memory }, observation, t * 1000);
    if (d.desired !== (previous?.desired ?? 0)) scaleEvents++;
    previous = d;
    containers = reconcile(containers, d, t);
    peak = Math.max(peak, containers.length);
    const readyAfter = containers.filter((c) => c.ready).length;
    ticks.push({
      t,
      desired: d.desired,
      ready: readyAfter,
      starting: containers.length - readyAfter,
      inFlight,
      buffered: queue.length,
      reason: d.reason,
    });
    if (t >= trace.seconds && finished === tasks.length && containers.length === 0) break;
  }
  const end = Math.min(t, trace.seconds + o.maxDrainSeconds);
  for (const c of containers) containerSeconds += end - c.startedAt;

  let unstarted = 0;
  for (let i = 0; i < waits.length; i++) {
    if (Number.isNaN(waits[i])) {
      waits[i] = end - tasks[i].arrival;
      unstarted++;
    }
  }
  const sorted = [...waits].sort((a, b) => a - b);
  return {
    trace: trace.name,
    policy: policy.type,
    tasks: tasks.length,
    waits,
    unstarted,
    p50Wait: quantile(sorted, 0.5),
    p95Wait: quantile(sorted, 0.95),
    withinTarget: tasks.length ? waits.filter((w) => w <= o.latencyTargetSeconds).length / tasks.length : 1,
    containerSeconds,
    scaleEvents,
    peakContainers: peak,
    seconds: end,
    ticks,
  };

  function reconcile(list: Container[], d: Decision, now: number): Container[] {
    if (d.desired > list.length) {
      const add = d.desired - list.length;
      for (let i = 0; i < add; i++)
        list.push({ id: `c${serial++}`, startedAt: now, readyAt: now + o.coldStartSeconds, ready: false, running: [], idleSince: now });
      return list;
    }
    let excess = list.length - d.desired;
    if (excess <= 0) return list;
    // As the scheduler's containersToStop: not ready first (newest first), then the named idle.
    const stop = new Set<string>();
    for (const c of [...list].reverse()) if (!c.ready && excess > 0 && stop.add(c.id)) excess--;
    for (const id of d.idleContainers) {
      const c = list.find((k) => k.id === id);
      if (excess > 0 && c && c.ready && c.running.length === 0 && !stop.has(id)) {
        stop.add(id);
        excess--;
      }
    }
    for (const c of list) if (stop.has(c.id)) containerSeconds += now - c.startedAt;
    return list.filter((c) => !stop.has(c.id));
  }
}

/** The q-quantile of sorted values (nearest rank); 0 for none. */
export function quantile(sorted: readonly number[], q: number): number {
  if (!sorted.length) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}
