import type { ContainerLoad, RouteRecord } from '#tern/contracts';

/** How long a container that vanished mid-request is skipped, in case its route lingers in KV. */
export const SUSPECT_MS = 5_000;

interface Slot {
  /** Where the container runs: its invokes go to that machine's subjects. */
  machineId: string;
  capacity: number;
  inFlight: number;
  /** When its last request finished (or it became ready): the idle clock for scale-down. */
  idleSince: number;
  suspectUntil: number;
}

export type WaitOutcome = { containerId: string } | { error: 'timeout' } | { error: 'aborted' };

interface Waiter {
  readonly since: number;
  settle(outcome: WaitOutcome): void;
}

/**
 * One endpoint version as this gateway sees it: its ready containers with their outstanding
 * requests, and the requests waiting for room. Pure bookkeeping (no I/O) so it is tested on
 * its own; the forwarder wires it to NATS and HTTP.
 */
export class Lane {
  private readonly slots = new Map<string, Slot>();
  private readonly waiters: Waiter[] = [];
  private durationSum = 0;
  private durationCount = 0;
  /** Requests seen since the last report: a version with traffic but no containers is still reported. */
  private touched = false;

  constructor(
    readonly deploymentId: string,
    readonly version: number,
    private readonly bufferSize: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Replaces the set of ready containers, keeping the counts of those that stay. */
  setRoutes(routes: readonly RouteRecord[]): void {
    const keep = new Set(routes.map((r) => r.containerId));
    for (const id of this.slots.keys()) if (!keep.has(id)) this.slots.delete(id);
    for (const r of routes) {
      const slot = this.slots.get(r.containerId);
      if (slot) slot.capacity = Math.max(1, r.capacity);
      else
        this.slots.set(r.containerId, {
          machineId: r.machineId,
          capacity: Math.max(1, r.capacity),
          inFlight: 0,
          idleSince: this.now(),
          suspectUntil: 0,
        });
    }
    this.drain();
  }

  /** The machine a ready container of this lane runs on; undefined once its route is gone. */
  machineOf(containerId: string): string | undefined {
    return this.slots.get(containerId)?.machineId;
  }

  /** The ready container with the fewest outstanding requests that has room; counted as taken. */
  tryAcquire(): string | undefined {
    this.touched = true;
    const now = this.now();
    let best: [string, Slot] | undefined;
    for (const entry of this.slots) {
      const slot = entry[1];
      if (slot.suspectUntil > now || slot.inFlight >= slot.capacity) continue;
      if (!best || slot.inFlight < best[1].inFlight) best = entry;
    }
    if (!best) return undefined;
    best[1].inFlight++;
    return best[0];
  }

  /** Whether some container could take a request now. */
  hasRoom(): boolean {
    const now = this.now();
    for (const s of this.slots.values()) if (s.suspectUntil <= now && s.inFlight < s.capacity) return true;
    return false;
  }

  /**
   * Takes a container now, or queues for one. Returns 'full' when the buffer is; otherwise a
   * promise that settles with a container or, after `timeoutMs`, with a timeout, or when `signal`
   * fires (its client left) with 'aborted', its place in the buffer given up at once.
   */
  acquire(timeoutMs: number, signal?: AbortSignal): Promise<WaitOutcome> | 'full' {
    if (signal?.aborted) return Promise.resolve({ error: 'aborted' });
    const now = this.tryAcquire();
    if (now) return Promise.resolve({ containerId: now });
    if (this.waiters.length >= this.bufferSize) return 'full';
    return new Promise<WaitOutcome>((resolve) => {
      const leave = (outcome: WaitOutcome) => {
        const i = this.waiters.indexOf(waiter);
        if (i >= 0) this.waiters.splice(i, 1);
        waiter.settle(outcome);
      };
      const timer = setTimeout(() => leave({ error: 'timeout' }), timeoutMs);
      const onAbort = () => leave({ error: 'aborted' });
      const waiter: Waiter = {
        since: this.now(),
        settle: (outcome) => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          resolve(outcome);
        },
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(waiter);
    });
  }

  /** A request on `containerId` finished (durationMs: time inside the container, when it got there). */
  release(containerId: string, durationMs?: number): void {
    const slot = this.slots.get(containerId);
    if (slot) {
      slot.inFlight = Math.max(0, slot.inFlight - 1);
      if (slot.inFlight === 0) slot.idleSince = this.now();
    }
    if (durationMs !== undefined) {
      this.durationSum += durationMs;
      this.durationCount++;
    }
    this.drain();
  }

  /** Skip a container for a while: it answered "no responders" or its agent said it is gone. */
  markSuspect(containerId: string, forMs = SUSPECT_MS): void {
    const slot = this.slots.get(containerId);
    if (slot) slot.suspectUntil = this.now() + forMs;
  }

  get buffered(): number {
    return this.waiters.length;
  }

  get oldestWaitMs(): number {
    return this.waiters.length ? this.now() - this.waiters[0].since : 0;
  }

  get inFlight(): number {
    let n = 0;
    for (const s of this.slots.values()) n += s.inFlight;
    return n;
  }

  /** True while there is anything to report: containers, requests, or traffic since the last report. */
  get active(): boolean {
    return this.slots.size > 0 || this.waiters.length > 0 || this.touched;
  }

  /** The numbers for a LoadReport; resets the period's mean duration and traffic flag. */
  takeReport(): { inFlight: number; buffered: number; meanDurationMs: number; containers: ContainerLoad[] } {
    const now = this.now();
    const containers = [...this.slots].map(([containerId, s]) => ({
      containerId,
      inFlight: s.inFlight,
      idleSeconds: s.inFlight > 0 ? 0 : Math.max(0, (now - s.idleSince) / 1000),
    }));
    const meanDurationMs = this.durationCount ? this.durationSum / this.durationCount : 0;
    this.durationSum = this.durationCount = 0;
    this.touched = this.waiters.length > 0;
    return { inFlight: this.inFlight, buffered: this.waiters.length, meanDurationMs, containers };
  }

  /** Hands freed room to waiters in arrival order. */
  private drain(): void {
    while (this.waiters.length) {
      const id = this.tryAcquire();
      if (!id) return;
      this.waiters.shift()!.settle({ containerId: id });
    }
  }

  /** Wakes every waiter with a timeout (the deployment was stopped or deleted). */
  rejectAll(): void {
    for (const w of this.waiters.splice(0)) w.settle({ error: 'timeout' });
  }
}
