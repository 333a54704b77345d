import { applyHeartbeat, applyNetworkTest, applyStartOutcome, applyState, applyTaskOutcome, newMachineRecord } from './record.js';
import { EMPTY_HEARTBEATS, punctuality, recordHeartbeat } from './heartbeat.js';
import { latencyComponent, median } from './latency.js';
import { networkComponent } from './network.js';
import { DAY_MS, DEFAULT_PARAMS as P, HOUR_MS, neutral } from './params.js';
import { changedMeaningfully, scoreMachines } from './score.js';
import { recordTransition, type Transition, uptime } from './uptime.js';

const now = Date.parse('2026-03-01T00:00:00Z');

describe('uptime', () => {
  it('is 1 − offline time / period, counting only time since the machine was first seen', () => {
    const t: Transition[] = [];
    recordTransition(t, { at: now - 10 * DAY_MS, online: true }, now);
    recordTransition(t, { at: now - 12 * HOUR_MS, online: false }, now);
    recordTransition(t, { at: now - 6 * HOUR_MS, online: true }, now);
    expect(uptime(t, now, DAY_MS)).toBeCloseTo(0.75);
    expect(uptime(t, now, 7 * DAY_MS)).toBeCloseTo(1 - 6 / (7 * 24));
    expect(uptime(t, now, 30 * DAY_MS)).toBeCloseTo(1 - 6 / (10 * 24));
    expect(uptime([], now, DAY_MS)).toBe(1);
  });

  it('keeps transitions in order, merges repeats and forgets what is older than 30 days', () => {
    const t: Transition[] = [];
    recordTransition(t, { at: now - 40 * DAY_MS, online: true }, now);
    recordTransition(t, { at: now - 35 * DAY_MS, online: false }, now);
    recordTransition(t, { at: now - 2 * HOUR_MS, online: true }, now);
    recordTransition(t, { at: now - 3 * HOUR_MS, online: false }, now); // late: slotted in, merges with the one before
    recordTransition(t, { at: now - HOUR_MS, online: true }, now);
    expect(t).toEqual([
      { at: now - 35 * DAY_MS, online: false },
      { at: now - 2 * HOUR_MS, online: true },
    ]);
    expect(uptime(t, now, DAY_MS)).toBeCloseTo(2 / 24);
  });
});

describe('heartbeat punctuality', () => {
  const beats = (gapsMs: number[], sequences?: number[]) => {
    let h = EMPTY_HEARTBEATS;
    let at = now - HOUR_MS;
    h = recordHeartbeat(h, 1, at, P);
    gapsMs.forEach((gap, i) => {
      at += gap;
      h = recordHeartbeat(h, sequences?.[i] ?? i + 2, at, P);
    });
    return h;
  };

  it('counts beats on time against beats expected; skipped and late beats lower it', () => {
    const steady = punctuality(beats(Array(50).fill(10_000)), now, P);
    const late = punctuality(beats(Array(50).fill(20_000)), now, P);
    const skipped = punctuality(
      beats(
        Array(25).fill(20_000),
        Array.from({ length: 25 }, (_, i) => 3 + 2 * i),
      ),
      now,
      P,
    );
    expect(steady).toBeGreaterThan(0.98);
    expect(late).toBeLessThan(0.2);
    expect(skipped).toBeLessThan(0.7);
    expect(punctuality(EMPTY_HEARTBEATS, now, P)).toBeCloseTo(neutral(P));
  });

  it('ignores repeats and does not hold an agent restart against it', () => {
    const h = beats([10_000, 10_000]);
    expect(recordHeartbeat(h, 3, now, P)).toBe(h);
    const restarted = recordHeartbeat(h, 1, now, P);
    expect(restarted.onTime.v - h.onTime.v).toBeCloseTo(1, 1);
  });

  it('ignores a beat that arrived before the last one counted, whatever its sequence', () => {
    const h = beats([10_000, 10_000]);
    expect(recordHeartbeat(h, 1, h.lastArrival! - 5000, P)).toBe(h);
    expect(recordHeartbeat(h, 4, h.lastArrival! - 5000, P)).toBe(h);
  });

  it('ignores a lower sequence stamped in the same millisecond as the last one counted (not a restart)', () => {
    const h = beats([10_000, 10_000]);
    expect(recordHeartbeat(h, h.lastSequence! - 1, h.lastArrival!, P)).toBe(h);
    expect(recordHeartbeat(h, h.lastSequence! + 1, h.lastArrival!, P).lastSequence).toBe(h.lastSequence! + 1);
  });
});

describe('start latency and network', () => {
  it('compares a machine with the median of its pool', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 2, 3])).toBe(2.5);
    expect(latencyComponent({ meanMs: 1000, weight: 1000 }, 1000, P)).toBeCloseTo(1, 2);
    expect(latencyComponent({ meanMs: 2000, weight: 1000 }, 1000, P)).toBeCloseTo(0.5, 2);
    expect(latencyComponent(null, 1000, P)).toBeCloseTo(neutral(P));
  });

  it('scores the slower leg and the round trip; a failed test is 0', () => {
    expect(networkComponent({ throughputMbps: 1000, latencyMs: 10, failed: false, testedAt: now }, P)).toBeCloseTo(1);
    expect(networkComponent({ throughputMbps: 100, latencyMs: 100, failed: false, testedAt: now }, P)).toBeCloseTo(
      0.7 * Math.sqrt(0.1) + 0.15,
    );
    expect(networkComponent({ throughputMbps: 0, latencyMs: 0, failed: true, testedAt: now }, P)).toBe(0);
    expect(networkComponent(null, P)).toBeCloseTo(neutral(P));
  });
});

describe('scoreMachines', () => {
  const machine = (id: string) => {
    const r = newMachineRecord(id, 'default');
    applyState(r, true, now - 2 * DAY_MS, now);
    applyNetworkTest(r, { throughputMbps: 900, latencyMs: 5, failed: false, testedAt: now - DAY_MS });
    for (let i = 0; i < 100; i++) applyHeartbeat(r, i + 1, now - DAY_MS + i * 10_000, P);
    return r;
  };

  it('a new machine is neither 0 nor 1', () => {
    const [s] = scoreMachines([newMachineRecord('m-new')], now, P);
    expect(s.score).toBeGreaterThan(0.5);
    expect(s.score).toBeLessThan(1);
    // … and passes the usual minimum of 0.9, so it can get work and earn a record.
    expect(s.score).toBeGreaterThanOrEqual(0.9);
    expect(Object.keys(s.components).sort()).toEqual([
      'heartbeat',
      'network',
      'startLatency',
      'startSuccess',
      'taskSuccess',
      'uptime',
      'uptime1d',
      'uptime30d',
      'uptime7d',
    ]);
  });

  it("ranks the machine that fails half of a deployment's tasks below its peer, and only it", () => {
    const good = machine('m-good');
    const bad = machine('m-bad');
    for (const [r, failEvery] of [
      [good, 0],
      [bad, 2],
    ] as const) {
      applyStartOutcome(r, `c-${r.machineId}`, 'd', 'success', now - HOUR_MS, P, 1500);
      for (let i = 0; i < 20; i++) {
        const failed = failEvery > 0 && i % failEvery === 0;
        applyTaskOutcome(r, `t${i}:1`, 'd', failed ? 'shared' : 'success', now - HOUR_MS + i * 1000, P);
      }
    }
    const alone = scoreMachines([machine('m-good')], now, P)[0];
    const [g, b] = scoreMachines([good, bad], now, P);
    expect(b.score).toBeLessThan(g.score - 0.05);
    expect(b.components.taskSuccess).toBeLessThan(0.7);
    expect(g.components.taskSuccess).toBeGreaterThan(0.95);
    expect(g.components.taskSuccess).toBeGreaterThan(alone.components.taskSuccess);
    expect(b.components.uptime).toBe(1);
    // A redelivered event is not counted twice.
    expect(applyTaskOutcome(bad, 't0:1', 'd', 'shared', now, P)).toBe(false);
  });

  it('old failures fade and downtime leaves the 1-day window first', () => {
    const r = machine('m-1');
    applyState(r, false, now - 3 * DAY_MS, now);
    applyState(r, true, now - 3 * DAY_MS + 6 * HOUR_MS, now);
    for (let i = 0; i < 10; i++) applyTaskOutcome(r, `t${i}`, 'd', 'machine', now - 20 * DAY_MS, P);
    const [s] = scoreMachines([r], now, P);
    expect(s.components.uptime1d).toBe(1);
    expect(s.components.uptime7d).toBeLessThan(1);
    expect(s.components.taskSuccess).toBeGreaterThan(0.85);
    const [fresh] = scoreMachines([r], now - 19 * DAY_MS, P);
    expect(fresh.components.taskSuccess).toBeLessThan(0.6);
  });

  it('says when a change deserves a history row', () => {
    const [s] = scoreMachines([newMachineRecord('m')], now, P);
    expect(changedMeaningfully(undefined, s)).toBe(true);
    expect(changedMeaningfully({ score: s.score, components: s.components }, s)).toBe(false);
    expect(changedMeaningfully({ score: s.score - 0.01, components: s.components }, s)).toBe(true);
  });
});
