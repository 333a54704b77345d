import { smoothed } from '#tern/timing';
import type { Observation } from './observation.js';

/** What the predictive policy assumes before it has seen a container start. */
export const DEFAULT_COLD_START_SECONDS = 20;
export const DEFAULT_STABLE_WINDOW_SECONDS = 60;
export const DEFAULT_PANIC_WINDOW_SECONDS = 6;

/** A burst the memory saw: when it began, how many arrivals it brought, its peak short-window rate. */
export interface Burst {
  /** Epoch ms of the tick the short window first rose above twice the stable one. */
  readonly onsetAt: number;
  /** Arrivals while it lasted, above the stable rate at its onset. */
  arrivals: number;
  /** Highest short-window arrival rate (per second) while it lasted. */
  peakRate: number;
}

/** A burst expected from the period of the ones seen. */
export interface ExpectedBurst {
  readonly at: number;
  readonly periodMs: number;
  /** Median arrivals of the last bursts. */
  readonly arrivals: number;
}

interface Sample {
  readonly at: number;
  readonly arrived: number;
  /** Arrivals of this tick above the rate before a burst (0 outside bursts). */
  excess: number;
}

/** Bursts kept to find a period (enough to span a few periods, small enough to adapt). */
const BURSTS_KEPT = 8;
/** Intervals that must agree before a period is believed. */
const INTERVALS_NEEDED = 2;

/**
 * What one deployment version's scaling has learned, updated by decide() every tick: the arrival
 * rate over a stable and a panic window (sliding windows of per-tick arrivals), the service time,
 * the cold start (from asking for a container to seeing it ready) and the bursts with their
 * onset times. Framework-free and mutable; the autoscaler keeps one per version in memory, so a
 * restart forgets it and the policy starts again from what it observes (empty memory means:
 * scale on the demand seen now, as queue_depth would).
 */
export class ScalingMemory {
  private readonly samples: Sample[] = [];
  private firstAt?: number;
  private lastAt?: number;
  private lastDemand = 0;
  private lastInFlight = 0;
  private lastReady = 0;
  /** When each container asked for and not yet ready was asked for, oldest first. */
  private readonly askedAt: number[] = [];
  private stableWindowMs = DEFAULT_STABLE_WINDOW_SECONDS * 1000;
  private panicWindowMs = DEFAULT_PANIC_WINDOW_SECONDS * 1000;
  private current?: Burst & { baseline: number };
  private readonly seen: Burst[] = [];

  /** Mean task duration in seconds, smoothed; undefined until a task has finished. */
  serviceSeconds?: number;
  /** Seconds from asking for a container to seeing it ready, smoothed; undefined until seen. */
  coldStartSeconds?: number;
  /** Arrivals per second over the stable window. */
  stableRate = 0;
  /** Arrivals per second over the stable window without the bursts' excess: the rate between bursts. */
  baselineRate = 0;
  /** Arrivals per second over the panic window. */
  panicRate = 0;
  /**
   * Epoch ms since the target has been below the desired count (decide() holds slots asked for
   * and not yet ready until it has been so for keep-warm); undefined while it is not.
   */
  lowSince?: number;
  /** The highest panic ask of the burst in progress (the predictive policy holds it until the burst ends). */
  panicHeld?: number;

  /** Bursts seen, oldest first (the one in progress included). */
  get bursts(): readonly Burst[] {
    return this.seen;
  }

  /** A burst is in progress: the short window runs at least twice the stable one, beyond noise. */
  get bursting(): boolean {
    return this.current !== undefined;
  }

  /** Updates the memory with one tick's observation; call once per tick, before deciding. */
  observe(o: Observation, now: number, windows: { stableWindowSeconds?: number; panicWindowSeconds?: number } = {}): void {
    this.stableWindowMs = Math.max(1000, (windows.stableWindowSeconds ?? DEFAULT_STABLE_WINDOW_SECONDS) * 1000);
    this.panicWindowMs = Math.min(this.stableWindowMs, Math.max(1000, (windows.panicWindowSeconds ?? DEFAULT_PANIC_WINDOW_SECONDS) * 1000));
    this.learnColdStart(o.containers.length, now);
    if (o.meanDurationMs > 0) {
      const s = o.meanDurationMs / 1000;
      this.serviceSeconds = smoothed(this.serviceSeconds, s, 0.3);
    }
    const load = Math.max(0, o.inFlight) + Math.max(0, o.buffered);
    const arrived = this.arrivals(o, load, now);
    if (this.firstAt === undefined) this.firstAt = now;
    this.samples.push({ at: now, arrived, excess: 0 });
    while (this.samples.length && this.samples[0].at <= now - this.stableWindowMs) this.samples.shift();
    this.stableRate = this.rate(now, this.stableWindowMs);
    this.panicRate = this.rate(now, this.panicWindowMs);
    this.trackBursts(arrived, now);
    this.baselineRate = this.rate(now, this.stableWindowMs, true);
    this.lastAt = now;
    this.lastDemand = load;
    this.lastInFlight = Math.max(0, o.inFlight);
  }

  /** Records what decide() asked for, so the next ready containers time the cold start. */
  decided(desired: number, ready: number, now: number): void {
    const waiting = Math.max(0, desired - ready);
    while (this.askedAt.length < waiting) this.askedAt.push(now);
    // Asked-for slots given back are the newest ones.
    while (this.askedAt.length > waiting) this.askedAt.pop();
    this.lastReady = ready;
  }

  /**
   * The next burst, when the last onsets came at a steady period (intervals within 10 % or 3 s of
   * their median); undefined when no period is known or the expected burst did not come.
   */
  expectedBurst(now: number): ExpectedBurst | undefined {
    const onsets = this.seen.map((b) => b.onsetAt);
    if (onsets.length < INTERVALS_NEEDED + 1) return undefined;
    const intervals = onsets
      .slice(1)
      .map((t, i) => t - onsets[i])
      .slice(-3);
    const periodMs = median(intervals);
    const tolerance = Math.max(3000, 0.1 * periodMs);
    if (intervals.some((d) => Math.abs(d - periodMs) > tolerance)) return undefined;
    const at = onsets[onsets.length - 1] + periodMs;
    if (now > at + tolerance) return undefined;
    return { at, periodMs, arrivals: median(this.seen.slice(-3).map((b) => b.arrivals)) };
  }

  private arrivals(o: Observation, load: number, now: number): number {
    if (o.arrived !== undefined) return Math.max(0, o.arrived);
    // Unknown: demand grew by what arrived minus what finished; the mean duration says how many
    // of the tasks running at the last tick finished since.
    if (this.lastAt === undefined) return 0;
    const seconds = (now - this.lastAt) / 1000;
    const finished = this.serviceSeconds ? Math.min(this.lastInFlight, (this.lastInFlight * seconds) / this.serviceSeconds) : 0;
    return Math.max(0, load - this.lastDemand + finished);
  }

  private rate(now: number, windowMs: number, withoutBursts = false): number {
    if (this.firstAt === undefined) return 0;
    // The first sample only sets the baseline: what it covers starts there.
    const covered = Math.min(windowMs, now - this.firstAt);
    if (covered <= 0) return 0;
    let sum = 0;
    for (let i = this.samples.length - 1; i >= 0 && this.samples[i].at > now - windowMs; i--) {
      sum += this.samples[i].arrived - (withoutBursts ? this.samples[i].excess : 0);
    }
    return (sum * 1000) / covered;
  }

  private trackBursts(arrived: number, now: number): void {
    const stable = this.stableRate;
    const panic = this.panicRate;
    const panicSeconds = this.panicWindowMs / 1000;
    // Poisson noise of the short window at the stable rate; a burst must stand 4 σ above it and
    // bring at least 3 arrivals more than the stable rate would.
    const noise = Math.sqrt(Math.max(stable, 1000 / this.stableWindowMs) / panicSeconds);
    const excess = panic - stable;
    const rising = panic >= 2 * stable && excess > 4 * noise && excess * panicSeconds >= 3;
    if (!this.current && rising) {
      // Seen late by up to a panic window: what it brought so far is the excess in that window.
      this.current = { onsetAt: now, arrivals: 0, peakRate: panic, baseline: stable };
      this.seen.push(this.current);
      if (this.seen.length > BURSTS_KEPT) this.seen.shift();
      for (const sample of this.samples)
        if (sample.at > now - this.panicWindowMs && sample.at < now) this.current.arrivals += this.markExcess(sample, stable, 1000);
    }
    const b = this.current;
    if (!b) return;
    b.arrivals += this.markExcess(this.samples[this.samples.length - 1], b.baseline, now - (this.lastAt ?? now));
    b.peakRate = Math.max(b.peakRate, panic);
    // Over when the short window is back near the stable rate.
    if (!rising && panic <= 1.2 * stable) this.current = undefined;
  }

  /** Marks what a tick brought above `rate` as a burst's, and returns it. */
  private markExcess(sample: Sample, rate: number, ms: number): number {
    sample.excess = Math.max(0, sample.arrived - (rate * ms) / 1000);
    return sample.excess;
  }

  private learnColdStart(ready: number, now: number): void {
    let started = Math.max(0, ready - this.lastReady);
    while (started-- > 0 && this.askedAt.length) {
      const seconds = (now - this.askedAt.shift()!) / 1000;
      this.coldStartSeconds = smoothed(this.coldStartSeconds, seconds, 0.3);
    }
    this.lastReady = ready;
  }
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}
