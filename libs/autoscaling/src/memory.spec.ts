import { ScalingMemory } from './memory.js';
import type { Observation } from './observation.js';

const at = (inFlight: number, buffered: number, fields: Partial<Observation> = {}): Observation => ({
  inFlight,
  buffered,
  meanDurationMs: 0,
  containers: [],
  ...fields,
});
const ready = (n: number) => Array.from({ length: n }, (_, i) => ({ containerId: `c${i}`, inFlight: 0, idleSeconds: 0 }));

/** Feeds one observation per second from `from` (seconds), `arrivals[i]` arriving at tick i. */
function feed(m: ScalingMemory, arrivals: readonly number[], from = 0) {
  arrivals.forEach((arrived, i) => m.observe(at(0, 0, { arrived }), (from + i) * 1000));
  return from + arrivals.length;
}

describe('ScalingMemory: arrival rates', () => {
  it('is empty before it has seen anything', () => {
    const m = new ScalingMemory();
    expect([m.stableRate, m.panicRate, m.bursting, m.serviceSeconds, m.coldStartSeconds]).toEqual([0, 0, false, undefined, undefined]);
    expect(m.expectedBurst(0)).toBeUndefined();
  });

  it('averages arrivals over the stable (60 s) and panic (6 s) windows, over what it has seen while young', () => {
    const m = new ScalingMemory();
    feed(m, [0, ...Array(10).fill(3)]);
    expect(m.stableRate).toBeCloseTo(3);
    expect(m.panicRate).toBeCloseTo(3);
    const end = feed(m, Array(100).fill(2), 11);
    feed(m, Array(6).fill(8), end);
    expect(m.panicRate).toBeCloseTo(8);
    expect(m.stableRate).toBeCloseTo((54 * 2 + 6 * 8) / 60);
  });

  it('forgets arrivals older than the stable window', () => {
    const m = new ScalingMemory();
    const end = feed(m, [0, ...Array(30).fill(5)]);
    feed(m, Array(61).fill(0), end);
    expect(m.stableRate).toBe(0);
  });

  it('infers arrivals from the change in demand and the completions the mean duration implies', () => {
    const m = new ScalingMemory();
    m.observe(at(10, 0, { meanDurationMs: 5000 }), 0);
    // 10 running at 5 s each: 2 finish per second; demand 10 → 11 means 3 arrived.
    m.observe(at(10, 1, { meanDurationMs: 5000 }), 1000);
    expect(m.stableRate).toBeCloseTo(3);
    expect(m.serviceSeconds).toBe(5);
  });

  it('takes the first tick as a baseline, not as arrivals (a restarted autoscaler sees old demand)', () => {
    const m = new ScalingMemory();
    m.observe(at(40, 10), 0);
    expect(m.stableRate).toBe(0);
  });
});

describe('ScalingMemory: bursts', () => {
  it('sees a burst when the panic window runs twice the stable one beyond noise, and its end', () => {
    const m = new ScalingMemory();
    let t = feed(m, Array(120).fill(1));
    expect(m.bursting).toBe(false);
    // One second of 10 could be noise at 1/s (2.5/s over 6 s is within 4 σ); two are not.
    t = feed(m, [10], t);
    expect(m.bursting).toBe(false);
    t = feed(m, [10], t);
    expect(m.bursting).toBe(true);
    expect(m.bursts.map((b) => b.onsetAt)).toEqual([121_000]);
    t = feed(m, Array(3).fill(10), t);
    feed(m, Array(20).fill(1), t);
    expect(m.bursting).toBe(false);
    // 50 arrived, about 6 of them at the stable rate.
    expect(m.bursts[0].arrivals).toBeGreaterThan(38);
    expect(m.bursts[0].arrivals).toBeLessThan(48);
  });

  it('keeps a baseline rate without the bursts (what the steady ask sizes for between bursts)', () => {
    const m = new ScalingMemory();
    const t = feed(m, Array(60).fill(1));
    feed(m, Array(5).fill(9), t);
    expect(m.bursting).toBe(true);
    expect(m.stableRate).toBeCloseTo((55 + 45) / 60);
    expect(m.baselineRate).toBeGreaterThan(0.9);
    expect(m.baselineRate).toBeLessThan(1.15);
  });

  it('does not take Poisson-like wobble for a burst', () => {
    const m = new ScalingMemory();
    feed(
      m,
      Array.from({ length: 600 }, (_, i) => [2, 0, 3, 1, 4, 2, 1, 3][i % 8]),
    );
    expect(m.bursts).toHaveLength(0);
  });

  it('expects the next burst once three came at a steady period, and stops expecting when one is missed', () => {
    const m = new ScalingMemory();
    let t = 0;
    for (let k = 0; k < 3; k++) t = feed(m, [...Array(100).fill(0), ...Array(5).fill(8), ...Array(15).fill(0)], t);
    expect(m.bursts.map((b) => b.onsetAt)).toEqual([100_000, 220_000, 340_000]);
    const next = m.expectedBurst(t * 1000);
    expect(next).toMatchObject({ at: 460_000, periodMs: 120_000 });
    // 40 per burst, less what the stable rate at its onset would have brought anyway.
    expect(next!.arrivals).toBeGreaterThan(36);
    expect(next!.arrivals).toBeLessThanOrEqual(42);
    expect(m.expectedBurst(480_000)).toBeUndefined();
  });

  it('expects nothing when the intervals disagree', () => {
    const m = new ScalingMemory();
    let t = 0;
    for (const gap of [100, 40, 160]) t = feed(m, [...Array(gap).fill(0), ...Array(5).fill(8), ...Array(15).fill(0)], t);
    expect(m.bursts).toHaveLength(3);
    expect(m.expectedBurst(t * 1000)).toBeUndefined();
  });
});

describe('ScalingMemory: cold start', () => {
  it('times a container from asking for it to seeing it ready', () => {
    const m = new ScalingMemory();
    m.observe(at(0, 2), 0);
    m.decided(2, 0, 0);
    for (let s = 1; s < 20; s++) m.observe(at(0, 2), s * 1000);
    m.observe(at(0, 2, { containers: ready(2) }), 20_000);
    expect(m.coldStartSeconds).toBe(20);
  });

  it('does not time slots given back before they started', () => {
    const m = new ScalingMemory();
    m.decided(3, 0, 0);
    m.decided(1, 0, 5000);
    m.observe(at(0, 0, { containers: ready(2) }), 30_000);
    expect(m.coldStartSeconds).toBe(30);
  });
});
