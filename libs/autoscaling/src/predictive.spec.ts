import { decide } from './decide.js';
import { ScalingMemory } from './memory.js';
import type { Observation, ScalingPolicy } from './observation.js';
import { predictiveTarget } from './predictive.js';

const policy: ScalingPolicy = {
  type: 'predictive',
  minContainers: 0,
  maxContainers: 50,
  tasksPerContainer: 4,
  desiredLatencySeconds: 10,
  keepWarmSeconds: 10,
};
const at = (inFlight: number, buffered: number, fields: Partial<Observation> = {}): Observation => ({
  inFlight,
  buffered,
  meanDurationMs: 0,
  containers: [],
  ...fields,
});
const ready = (n: number, busy = 0) =>
  Array.from({ length: n }, (_, i) => ({ containerId: `c${i}`, inFlight: i < busy ? 1 : 0, idleSeconds: 0 }));

/** Ticks a memory through `arrivals` (one per second) with 5 s tasks, nothing queued. */
function learn(m: ScalingMemory, arrivals: readonly number[], from = 0) {
  arrivals.forEach((arrived, i) => m.observe(at(0, 0, { arrived, meanDurationMs: 5000 }), (from + i) * 1000));
  return from + arrivals.length;
}

describe('predictive with an empty memory (or none)', () => {
  it('scales on the demand of the tick, as queue_depth would', () => {
    expect(predictiveTarget(policy, at(0, 9), undefined, 0).containers).toBe(3);
    expect(predictiveTarget(policy, at(0, 9), new ScalingMemory(), 0).containers).toBe(3);
    expect(predictiveTarget(policy, at(0, 0), new ScalingMemory(), 0).containers).toBe(0);
  });

  it('scales from zero on one queued task', () => {
    expect(decide({ policy, memory: new ScalingMemory() }, at(0, 1), 0).desired).toBe(1);
  });

  it('weighs a queued task by S / L: short tasks drain from a running worker within the latency', () => {
    // 1 s tasks, 10 s latency: 40 queued are 4 workers' worth, one container.
    expect(predictiveTarget(policy, at(0, 40, { meanDurationMs: 1000 }), undefined, 0).containers).toBe(1);
    // 20 s tasks wait as long as they run: each needs its own worker.
    expect(predictiveTarget(policy, at(0, 40, { meanDurationMs: 20_000 }), undefined, 0).containers).toBe(10);
  });
});

describe('predictive with history', () => {
  it("sizes by Little's law on the stable arrival rate at the target utilization", () => {
    const m = new ScalingMemory();
    const t = learn(m, [0, ...Array(60).fill(2)]);
    // 2/s × 5 s = 10 busy workers; at 80 % of 4 per container → 3.125 → 4.
    const target = predictiveTarget(policy, at(0, 0, { meanDurationMs: 5000 }), m, t * 1000);
    expect(target.containers).toBe(4);
    expect(target.reason).toMatch(/^predictive: steady 2.00\/s × 5.0 s → 4/);
  });

  it('panics on a burst (short window ≥ 2× the stable one) and holds its highest ask until the burst is over', () => {
    const m = new ScalingMemory();
    let t = learn(m, [0, ...Array(120).fill(1)]);
    t = learn(m, [12, 12], t);
    expect(m.bursting).toBe(true);
    const first = predictiveTarget(policy, at(0, 0), m, t * 1000);
    expect(first.reason).toMatch(/^predictive: panic/);
    t = learn(m, [12, 12, 12], t);
    const peak = predictiveTarget(policy, at(0, 0), m, t * 1000).containers;
    expect(peak).toBeGreaterThan(first.containers);
    t = learn(m, [1], t);
    expect(predictiveTarget(policy, at(0, 0), m, t * 1000).containers).toBe(peak);
    learn(m, Array(30).fill(1), t);
    expect(m.bursting).toBe(false);
  });

  it('pre-warms from the learned cold start + 5 s before a burst that recurs at a steady period', () => {
    const m = new ScalingMemory();
    let t = 0;
    const cycle = [...Array(100).fill(0), ...Array(5).fill(8), ...Array(15).fill(0)];
    for (let k = 0; k < 3; k++) t = learn(m, cycle, t);
    // Next onset at 460 s; cold start unknown → 20 s assumed, so from 435 s.
    learn(m, Array(435 - t).fill(0), t);
    expect(predictiveTarget(policy, at(0, 0), m, 434_000).containers).toBe(0);
    const prewarm = predictiveTarget(policy, at(0, 0), m, 435_000);
    // ~40 arrivals × 5 s / (4 × (10 + 5) s) → 4 containers, ready when the burst comes.
    expect(prewarm.containers).toBe(4);
    expect(prewarm.reason).toMatch(/pre-warm for ~\d+ arrivals in 25 s \(period 120 s\)/);
    expect(predictiveTarget({ ...policy, prewarm: false }, at(0, 0), m, 435_000).containers).toBe(0);
  });

  it('pre-warms earlier when it has seen longer cold starts', () => {
    const m = new ScalingMemory();
    m.decided(1, 0, 0);
    m.observe(at(0, 0, { containers: ready(1) }), 40_000);
    expect(m.coldStartSeconds).toBe(40);
    let t = 41;
    for (let k = 0; k < 3; k++) t = learn(m, [...Array(100).fill(0), ...Array(5).fill(8), ...Array(15).fill(0)], t);
    const next = m.expectedBurst(t * 1000)!.at;
    learn(m, Array((next - 46_000) / 1000 - t).fill(0), t);
    expect(predictiveTarget(policy, at(0, 0), m, next - 45_000).containers).toBeGreaterThan(0);
    expect(predictiveTarget(policy, at(0, 0), m, next - 46_000).containers).toBe(0);
  });

  it('does not pre-warm when the cold start it has seen is within half the latency (reacting keeps the promise)', () => {
    const m = new ScalingMemory();
    m.decided(1, 0, 0);
    m.observe(at(0, 0, { containers: ready(1) }), 5000);
    let t = 6;
    for (let k = 0; k < 3; k++) t = learn(m, [...Array(100).fill(0), ...Array(5).fill(8), ...Array(15).fill(0)], t);
    const next = m.expectedBurst(t * 1000)!.at;
    learn(m, Array((next - 5000) / 1000 - t).fill(0), t);
    expect(predictiveTarget(policy, at(0, 0), m, next - 5000).containers).toBe(0);
    expect(predictiveTarget({ ...policy, desiredLatencySeconds: 9 }, at(0, 0), m, next - 5000).containers).toBeGreaterThan(0);
  });

  it('never asks for fewer than the tasks running need', () => {
    const m = new ScalingMemory();
    learn(m, [0, 0, 0]);
    expect(predictiveTarget(policy, at(12, 0, { containers: ready(3, 3) }), m, 3000).containers).toBe(3);
  });
});
