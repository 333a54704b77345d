import type { Decision } from '../decide.js';
import type { ContainerObservation, Observation } from '../observation.js';
import type { Trace } from './traces.js';

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
 * The cluster a simulation runs: its containers, the queue of tasks waiting, and what each task
 * waited. The gateway's routing (advance, dispatch), the autoscaler's view (observe) and the
 * scheduler's reconciliation (reconcile), each as the real one does it.
 */
export class SimulatedCluster {
  private containers: Container[] = [];
  private readonly queue: number[] = [];
  private readonly durations: number[] = [];
  private readonly waits: number[];
  /** Tasks arrived so far (the index of the next to arrive). */
  arrived = 0;
  private finished = 0;
  private serial = 0;
  /** Seconds containers existed, cold start included: those stopped so far (and all after finish). */
  containerSeconds = 0;

  constructor(
    private readonly tasks: Trace['tasks'],
    private readonly o: { readonly workers: number; readonly coldStartSeconds: number },
  ) {
    this.waits = new Array<number>(tasks.length).fill(NaN);
  }

  get size(): number {
    return this.containers.length;
  }

  /** Every task finished and every container gone. */
  get drained(): boolean {
    return this.finished === this.tasks.length && this.containers.length === 0;
  }

  /** Containers ready and still starting. */
  counts(): { ready: number; starting: number } {
    const ready = this.containers.filter((c) => c.ready).length;
    return { ready, starting: this.containers.length - ready };
  }

  /** Processes every arrival, completion and readiness up to time `until`, in time order. */
  advance(until: number): void {
    for (;;) {
      let at = Infinity;
      let kind: 'arrival' | 'ready' | 'done' = 'arrival';
      let container: Container | undefined;
      if (this.arrived < this.tasks.length) at = this.tasks[this.arrived].arrival;
      for (const c of this.containers) {
        if (!c.ready && c.readyAt < at) [at, kind, container] = [c.readyAt, 'ready', c];
        for (const r of c.running) if (r.endsAt < at) [at, kind, container] = [r.endsAt, 'done', c];
      }
      if (at > until) return;
      if (kind === 'arrival') this.queue.push(this.arrived++);
      else if (kind === 'ready') {
        container!.ready = true;
        container!.idleSince = at;
      } else this.complete(container!, at);
      this.dispatch(at);
    }
  }

  private complete(c: Container, at: number): void {
    const i = c.running.findIndex((r) => r.endsAt === at);
    const [r] = c.running.splice(i, 1);
    this.durations.push(this.tasks[r.task].service);
    if (this.durations.length > DURATIONS_AVERAGED) this.durations.shift();
    this.finished++;
    if (c.running.length === 0) c.idleSince = at;
  }

  /** Starts waiting tasks on the ready container with the fewest tasks, while one has room. */
  private dispatch(at: number): void {
    while (this.queue.length) {
      let best: Container | undefined;
      for (const c of this.containers)
        if (c.ready && c.running.length < this.o.workers && (!best || c.running.length < best.running.length)) best = c;
      if (!best) return;
      const task = this.queue.shift()!;
      this.waits[task] = at - this.tasks[task].arrival;
      best.running.push({ task, endsAt: at + this.tasks[task].service });
    }
  }

  /** The Observation the autoscaler builds at `t`; `arrived` when the queue reports arrivals. */
  observe(t: number, arrived: number | undefined): Observation {
    const ready = this.containers.filter((c) => c.ready);
    const durations = this.durations;
    return {
      inFlight: ready.reduce((n, c) => n + c.running.length, 0),
      buffered: this.queue.length,
      meanDurationMs: durations.length ? (durations.reduce((a, b) => a + b, 0) / durations.length) * 1000 : 0,
      containers: ready.map((c): ContainerObservation => ({
        containerId: c.id,
        inFlight: c.running.length,
        idleSeconds: c.running.length ? 0 : t - c.idleSince,
      })),
      ...(arrived !== undefined ? { arrived } : {}),
    };
  }

  /** As the scheduler reconciles: start up to desired; above it, stop containers not yet ready (newest first), then the named idle. */
  reconcile(d: Decision, now: number): void {
    const list = this.containers;
    if (d.desired > list.length) {
      const add = d.desired - list.length;
      for (let i = 0; i < add; i++)
        list.push({
          id: `c${this.serial++}`,
          startedAt: now,
          readyAt: now + this.o.coldStartSeconds,
          ready: false,
          running: [],
          idleSince: now,
        });
      return;
    }
    let excess = list.length - d.desired;
    if (excess <= 0) return;
    const stop = new Set<string>();
    for (const c of [...list].reverse()) if (!c.ready && excess > 0 && stop.add(c.id)) excess--;
    for (const id of d.idleContainers) {
      const c = list.find((k) => k.id === id);
      if (excess > 0 && c && c.ready && c.running.length === 0 && !stop.has(id)) {
        stop.add(id);
        excess--;
      }
    }
    for (const c of list) if (stop.has(c.id)) this.containerSeconds += now - c.startedAt;
    this.containers = list.filter((c) => !stop.has(c.id));
  }

  /** Ends the run at `end`: containers left count until then, tasks never started waited until then. */
  finish(end: number): { waits: number[]; unstarted: number } {
    for (const c of this.containers) this.containerSeconds += end - c.startedAt;
    let unstarted = 0;
    for (let i = 0; i < this.waits.length; i++) {
      if (Number.isNaN(this.waits[i])) {
        this.waits[i] = end - this.tasks[i].arrival;
        unstarted++;
      }
    }
    return { waits: this.waits, unstarted };
  }
}
