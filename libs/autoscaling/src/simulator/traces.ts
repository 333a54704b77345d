import { Random } from './random.js';

/** One task (or request) of a trace: when it arrives and how long it runs once started, in seconds. */
export interface TraceTask {
  readonly arrival: number;
  readonly service: number;
}

/** Arrivals to replay, sorted by arrival, with the length of the arrival period. */
export interface Trace {
  readonly name: string;
  readonly description: string;
  readonly seconds: number;
  readonly tasks: readonly TraceTask[];
}

export interface TraceOptions {
  readonly seed: number;
  /** Length of the arrival period in seconds. */
  readonly seconds: number;
  /** Mean task duration in seconds (log-normal). */
  readonly serviceSeconds: number;
  /** Coefficient of variation of task durations. */
  readonly serviceCv: number;
}

export const DEFAULT_TRACE_OPTIONS: TraceOptions = { seed: 1, seconds: 1800, serviceSeconds: 5, serviceCv: 0.5 };

/** A burst: `count` arrivals spread at random over `spread` seconds from `at`. */
interface Batch {
  readonly at: number;
  readonly count: number;
  readonly spread: number;
}

/**
 * Builds a trace from a Poisson background of rate(t) per second (by thinning against maxRate)
 * plus batches. Durations come from a generator of their own, so two traces with the same seed
 * and arrivals get the same durations.
 */
function build(
  name: string,
  description: string,
  o: TraceOptions,
  rate: (t: number) => number,
  maxRate: number,
  batches: readonly Batch[],
  rng: Random,
): Trace {
  const arrivals: number[] = [];
  if (maxRate > 0) {
    for (let t = rng.exponential(1 / maxRate); t < o.seconds; t += rng.exponential(1 / maxRate)) {
      if (rng.next() * maxRate < rate(t)) arrivals.push(t);
    }
  }
  for (const b of batches) {
    for (let i = 0; i < b.count; i++) arrivals.push(b.at + rng.next() * b.spread);
  }
  arrivals.sort((a, b) => a - b);
  const durations = new Random(o.seed * 7919 + 17);
  const tasks = arrivals
    .filter((a) => a < o.seconds)
    .map((arrival) => ({ arrival, service: Math.max(0.05, durations.logNormal(o.serviceSeconds, o.serviceCv)) }));
  return { name, description, seconds: o.seconds, tasks };
}

/** A constant Poisson rate: what no policy should flap under. */
export function steadyTrace(options: Partial<TraceOptions> & { rate?: number } = {}): Trace {
  const o = { ...DEFAULT_TRACE_OPTIONS, ...options };
  const rate = options.rate ?? 2;
  return build('steady', `Poisson ${rate}/s`, o, () => rate, rate, [], new Random(o.seed));
}

/** A low rate that steps up tenfold for a while, then back. */
export function stepBurstTrace(options: Partial<TraceOptions> & { base?: number; high?: number; highSeconds?: number } = {}): Trace {
  const o = { ...DEFAULT_TRACE_OPTIONS, ...options };
  const base = options.base ?? 0.5;
  const high = options.high ?? 5;
  const from = Math.round(o.seconds / 3);
  const to = from + (options.highSeconds ?? Math.round(o.seconds / 6));
  return build(
    'step',
    `Poisson ${base}/s, ${high}/s from ${from} s to ${to} s`,
    o,
    (t) => (t >= from && t < to ? high : base),
    Math.max(base, high),
    [],
    new Random(o.seed + 1),
  );
}

/** A trickle with a burst of `size` arrivals every `period` seconds (a nightly batch, an hourly job, compressed). */
export function periodicBurstsTrace(
  options: Partial<TraceOptions> & { base?: number; period?: number; size?: number; spread?: number } = {},
): Trace {
  const o = { ...DEFAULT_TRACE_OPTIONS, ...options };
  const base = options.base ?? 0.1;
  const period = options.period ?? 120;
  const size = options.size ?? 40;
  const spread = options.spread ?? 5;
  const batches: Batch[] = [];
  for (let at = period / 2; at < o.seconds; at += period) batches.push({ at, count: size, spread });
  return build(
    'periodic',
    `Poisson ${base}/s + ${size} over ${spread} s every ${period} s`,
    o,
    () => base,
    base,
    batches,
    new Random(o.seed + 2),
  );
}

/** A Poisson background with spikes at random times (gaps exponential around `spikeEvery` s). */
export function poissonSpikesTrace(
  options: Partial<TraceOptions> & { rate?: number; spikeEvery?: number; size?: number; spread?: number } = {},
): Trace {
  const o = { ...DEFAULT_TRACE_OPTIONS, ...options };
  const rate = options.rate ?? 1;
  const every = options.spikeEvery ?? 150;
  const size = options.size ?? 30;
  const spread = options.spread ?? 3;
  const rng = new Random(o.seed + 3);
  const batches: Batch[] = [];
  for (let at = rng.exponential(every); at < o.seconds; at += rng.exponential(every)) batches.push({ at, count: size, spread });
  return build('spikes', `Poisson ${rate}/s + ${size} over ${spread} s at random (mean gap ${every} s)`, o, () => rate, rate, batches, rng);
}

/** The four traces the bench replays. */
export function standardTraces(options: Partial<TraceOptions> = {}): Trace[] {
  return [steadyTrace(options), stepBurstTrace(options), periodicBurstsTrace(options), poissonSpikesTrace(options)];
}
