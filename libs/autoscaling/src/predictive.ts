import { DEFAULT_COLD_START_SECONDS, type ScalingMemory } from './memory.js';
import type { Observation, ScalingPolicy } from './observation.js';

/** The predictive policy's knobs when the spec leaves them out. */
export const PREDICTIVE_DEFAULTS = { desiredLatencySeconds: 10, targetUtilization: 0.8, prewarm: true } as const;
/** Seconds of margin before an expected burst on top of the learned cold start. */
const PREWARM_MARGIN_SECONDS = 5;

export interface PredictiveTarget {
  readonly containers: number;
  readonly reason: string;
}

/**
 * predictive: the most of four asks, each in containers of tasksPerContainer workers.
 * - now: the tasks running plus the queue, a queued task weighing min(1, S / L) (a worker
 *   serves L / S short tasks within the desired latency L), as queue_depth with patience;
 *   during a burst every queued task weighs 1 (the queue grows faster than it drains);
 * - steady: Little's law on the arrival rate between bursts over the stable window λ (bursts are
 *   the panic and pre-warm asks' business) and service time S, at the target utilization u:
 *   λ·S / (w·u);
 * - panic: the same on the panic-window rate while a burst is on (short window ≥ 2× the stable
 *   one, beyond Poisson noise), held at its highest until the burst is over;
 * - pre-warm: when bursts have come at a steady period, from (learned cold start + 5 s) before
 *   the next one, containers for its expected arrivals N to start within L: N·S / (w·(L + S)),
 *   at most N / w, on top of the steady ask; only when the cold start is longer than L / 2
 *   (a shorter one lets the reaction keep the latency, and pre-warming would only cost).
 * With an empty memory only "now" applies. The panic ask's hold is kept in the memory (its only
 * write here), so call this once per decision.
 */
export function predictiveTarget(policy: ScalingPolicy, o: Observation, memory: ScalingMemory | undefined, now: number): PredictiveTarget {
  const w = Math.max(1, Math.floor(policy.tasksPerContainer));
  const latency = Math.max(0.001, policy.desiredLatencySeconds ?? PREDICTIVE_DEFAULTS.desiredLatencySeconds);
  const utilization = Math.min(1, Math.max(0.1, policy.targetUtilization ?? PREDICTIVE_DEFAULTS.targetUtilization));
  const service = memory?.serviceSeconds ?? (o.meanDurationMs > 0 ? o.meanDurationMs / 1000 : undefined);
  const inFlight = Math.max(0, o.inFlight);
  const buffered = Math.max(0, o.buffered);

  const queueWeight = service === undefined || memory?.bursting ? 1 : Math.min(1, service / latency);
  const asks: [string, number][] = [[`now ${inFlight}+${buffered} queued`, Math.ceil((inFlight + buffered * queueWeight) / w)]];
  if (memory && service !== undefined) {
    const perContainer = w * utilization;
    asks.push([
      `steady ${memory.baselineRate.toFixed(2)}/s × ${service.toFixed(1)} s`,
      Math.ceil((memory.baselineRate * service) / perContainer),
    ]);
    if (memory.bursting) {
      const panic = Math.ceil((memory.panicRate * service) / perContainer);
      const held = Math.max(panic, memory.panicHeld ?? 0);
      memory.panicHeld = held;
      asks.push([`panic ${memory.panicRate.toFixed(2)}/s`, held]);
    } else {
      memory.panicHeld = undefined;
    }
  }
  const coldStart = memory?.coldStartSeconds ?? DEFAULT_COLD_START_SECONDS;
  // A cold start within half the latency lets a reaction keep the promise: no need to pay ahead.
  if (memory && policy.prewarm !== false && coldStart > latency / 2) {
    const expected = memory.expectedBurst(now);
    const lead = coldStart + PREWARM_MARGIN_SECONDS;
    if (expected && now >= expected.at - lead * 1000 && !memory.bursting) {
      const s = service ?? latency;
      const forBurst = Math.min(Math.ceil(expected.arrivals / w), Math.max(1, Math.ceil((expected.arrivals * s) / (w * (latency + s)))));
      const steady = asks.length > 1 ? asks[1][1] : 0;
      const inSeconds = Math.round((expected.at - now) / 1000);
      asks.push([
        `pre-warm for ~${Math.round(expected.arrivals)} arrivals in ${inSeconds} s (period ${Math.round(expected.periodMs / 1000)} s)`,
        steady + forBurst,
      ]);
    }
  }
  const [why, containers] = asks.reduce((best, a) => (a[1] > best[1] ? a : best));
  return { containers, reason: `predictive: ${why} → ${containers}` };
}
