import {
  applyHeartbeat,
  applyMeasuredNetwork,
  applyObservedFault,
  applyStartCommand,
  applyStartOutcome,
  applyState,
  applyTaskOutcome,
  machineRecordOf,
  newMachineRecord,
} from './record.js';
import { EMPTY_HEARTBEATS, punctuality, recordHeartbeat } from './heartbeat.js';
import { latencyComponent, median } from './latency.js';
import { networkComponent } from './network.js';
import { DAY_MS, DEFAULT_PARAMS as P, HOUR_MS, neutral } from './params.js';
import { historyDue, scoreMachines } from './score.js';
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

  it('ignores a lower sequence stamped within half an interval of the last one counted (another replica took it late), not a restart', () => {
    const h = beats([10_000, 10_000]);
    expect(recordHeartbeat(h, h.lastSequence! - 1, h.lastArrival! + 2000, P)).toBe(h);
    // Half an interval on, a lower sequence is the agent's restart.
    expect(recordHeartbeat(h, 1, h.lastArrival! + 6000, P).lastSequence).toBe(1);
  });

  describe("the service's own deafness (core NATS beats lost while it was down)", () => {
    const h = beats([10_000, 10_000]); // sequence 3, last arrival `last`
    const last = h.lastArrival!;
    const gained = (next: typeof h) => ({ expected: next.expected.v - h.expected.v, onTime: next.onTime.v - h.onTime.v });

    it('holds neither the silence nor the beats sent while it could not hear against the machine', () => {
      // Down 2 minutes, from just after the last beat it stored: 12 beats sent meanwhile are lost.
      const deaf = [[last + 500, last + 120_500]] as const;
      const next = recordHeartbeat(h, 3 + 13, last + 130_000, P, deaf);
      expect(gained(next).expected).toBeCloseTo(1, 2);
      expect(gained(next).onTime).toBeCloseTo(1, 2);
      // Without the span, the same beat is 12 beats skipped.
      const judged = recordHeartbeat(h, 3 + 13, last + 130_000, P);
      expect(gained(judged).expected).toBeCloseTo(13, 2);
      expect(gained(judged).onTime).toBeCloseTo(1, 2);
    });

    it('still judges the part of the gap outside its deafness', () => {
      // Deaf one minute of a gap of 130 s: the 6 beats the agent skipped after it are still expected.
      const deaf = [[last + 500, last + 60_500]] as const;
      const skipped = recordHeartbeat(h, 3 + 13, last + 130_000, P, deaf);
      expect(gained(skipped).expected).toBeCloseTo(7, 2);
      expect(gained(skipped).onTime).toBeCloseTo(1, 2);
      // An agent that sent nothing for 130 s (its next sequence): 70 s of silence heard, late.
      const late = recordHeartbeat(h, 4, last + 130_000, P, deaf);
      expect(gained(late).expected).toBeCloseTo(1, 2);
      expect(gained(late).onTime).toBeCloseTo(0, 2);
      // A span that does not touch the gap changes nothing.
      const elsewhere = recordHeartbeat(h, 4, last + 25_000, P, [[last - 60_000, last - 1000]]);
      expect(elsewhere).toEqual(recordHeartbeat(h, 4, last + 25_000, P));
      expect(gained(elsewhere).onTime).toBeCloseTo(0, 2);
    });
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
  });
});

describe('scoreMachines', () => {
  const machine = (id: string) => {
    const r = newMachineRecord(id, 'default');
    applyState(r, true, now - 2 * DAY_MS, now);
    for (let i = 0; i < 100; i++) applyHeartbeat(r, i + 1, now - DAY_MS + i * 10_000, P);
    return r;
  };

  it('a new machine is unproven: the prior, neither 0 nor 1, with no network component', () => {
    const [s] = scoreMachines([newMachineRecord('m-new')], now, P);
    expect(s.score).toBeGreaterThan(0.5);
    expect(s.score).toBeLessThan(1);
    // … and passes the usual minimum of 0.9, so it can get work and earn a record.
    expect(s.score).toBeGreaterThanOrEqual(0.9);
    expect(s.standing).toBe('unproven');
    expect(s.observed).toBe(0);
    expect(Object.keys(s.components).sort()).toEqual([
      'heartbeat',
      'startLatency',
      'startSuccess',
      'taskSuccess',
      'uptime',
      'uptime1d',
      'uptime30d',
      'uptime7d',
    ]);
  });

  it('a network the control plane did not measure scores nothing; one it measured counts', () => {
    // A record stored when the agent's own test was kept under `network`: read back, it is dropped.
    const { measuredNetwork: _, ...document } = machine('m-claims');
    const claimed = machineRecordOf(
      'm-claims',
      'default',
      { ...document, network: { throughputMbps: 9400, latencyMs: 1, failed: false, testedAt: now } },
      document.heartbeats,
    );
    const silent = machineRecordOf(
      'm-silent',
      'default',
      { ...document, network: { throughputMbps: 0, latencyMs: 0, failed: true, testedAt: now } },
      document.heartbeats,
    );
    const [c, q] = scoreMachines([claimed, silent], now, P);
    expect(c.components.network).toBeUndefined();
    expect(c.score).toBe(q.score);

    const measured = machine('m-measured');
    applyMeasuredNetwork(measured, { throughputMbps: 100, latencyMs: 100, failed: false, testedAt: now - HOUR_MS });
    const [m, plain] = scoreMachines([measured, machine('m-plain')], now, P);
    expect(m.components.network).toBeCloseTo(0.7 * Math.sqrt(0.1) + 0.15, 3);
    expect(m.score).toBeLessThan(plain.score);
  });

  it('a machine that never answers start commands drops below a minimum of 0.9 within 3 failed starts', () => {
    const r = machine('m-silent');
    const scores = [scoreMachines([r], now, P)[0].score];
    for (let i = 0; i < 3; i++) {
      applyStartCommand(r, `c${i}`, now - 10 * 60_000 + i * 60_000);
      expect(applyObservedFault(r, { containerId: `c${i}`, deploymentId: 'd', afterReady: false }, now - 9 * 60_000 + i * 60_000, P)).toBe(
        true,
      );
      scores.push(scoreMachines([r], now, P)[0].score);
    }
    expect(scores[0]).toBeGreaterThanOrEqual(0.9);
    expect(scores[3]).toBeLessThan(0.9);
    // Each failure lowers it further; none is charged twice (a redelivered fact counts nothing).
    for (let i = 1; i < scores.length; i++) expect(scores[i]).toBeLessThan(scores[i - 1]);
    expect(applyObservedFault(r, { containerId: 'c0', deploymentId: 'd', afterReady: false }, now, P)).toBe(false);
    const [s] = scoreMachines([r], now, P);
    expect(s.score).toBe(scores[3]);
    expect(s.observed).toBe(3);
    expect(s.standing).toBe('unproven');
    console.log(`score of a machine that answers no start: ${scores.join(' → ')}`);
  });

  it('an honest machine earns its standing with observed work and stays above 0.9', () => {
    const r = machine('m-honest');
    for (let i = 0; i < 4; i++) applyStartOutcome(r, `c${i}`, 'd', 'success', now, P, 1500);
    expect(scoreMachines([r], now, P)[0].standing).toBe('unproven');
    applyTaskOutcome(r, 't1:1', 'd', 'success', now, P);
    const [s] = scoreMachines([r], now, P);
    expect(s.standing).toBe('proven');
    expect(s.observed).toBe(P.provenAfter);
    expect(s.score).toBeGreaterThan(0.95);
    // Its record fades: weeks without work and it is unproven again.
    expect(scoreMachines([r], now + 30 * DAY_MS, P)[0].standing).toBe('unproven');
  });

  it('a container lost after it was ready counts once more against the machine; one lost before, as its start', () => {
    const r = machine('m-lossy');
    applyStartOutcome(r, 'c-ready', 'd', 'success', now - HOUR_MS, P, 1500);
    expect(applyObservedFault(r, { containerId: 'c-ready', deploymentId: 'd', afterReady: false }, now, P)).toBe(false);
    expect(applyObservedFault(r, { containerId: 'c-ready', deploymentId: 'd', afterReady: true }, now, P)).toBe(true);
    expect(applyObservedFault(r, { containerId: 'c-ready', deploymentId: 'd', afterReady: true }, now, P)).toBe(false);
    // The agent reported the start failed first (machine-lost from the scheduler's CONTAINER_FAILED): one outcome per start.
    applyStartCommand(r, 'c-new', now - 60_000);
    applyStartOutcome(r, 'c-new', 'd', 'machine', now - 30_000, P);
    expect(applyObservedFault(r, { containerId: 'c-new', deploymentId: 'd', afterReady: false }, now, P)).toBe(false);
    expect(r.commands).toEqual({});
    const [s] = scoreMachines([r], now, P);
    expect(s.observed).toBeCloseTo(3, 1);
    expect(s.components.startSuccess).toBeCloseTo((3 - 2 + P.prior.alpha) / (3 + P.prior.alpha + P.prior.beta), 2);
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
    // Ten failures faded to a fifth of one: the rate is back near the prior's 0.9.
    expect(s.components.taskSuccess).toBeGreaterThan(0.8);
    const [fresh] = scoreMachines([r], now - 19 * DAY_MS, P);
    expect(fresh.components.taskSuccess).toBeLessThan(0.6);
  });

  it('says when a change deserves a history row', () => {
    const [s] = scoreMachines([newMachineRecord('m')], now, P);
    const cadence = { everyMs: 15 * 60_000, componentsMs: 5 * 60_000 };
    const written = (ago: number, score: number, components: Record<string, number>, standing = s.standing) => ({
      score,
      components,
      standing,
      historyAt: now - ago,
    });
    const nudged = (by: number) => ({ ...s.components, heartbeat: s.components.heartbeat - by });
    expect(historyDue(undefined, s, now, cadence)).toBe(true);
    expect(historyDue(written(1000, s.score, s.components), s, now, cadence)).toBe(false);
    // The periodic row, moved or not.
    expect(historyDue(written(15 * 60_000, s.score, s.components), s, now, cadence)).toBe(true);
    // What placement reads: the score and the standing, at once.
    expect(historyDue(written(1000, s.score - 0.006, s.components), s, now, cadence)).toBe(true);
    expect(historyDue(written(1000, s.score - 0.004, s.components), s, now, cadence)).toBe(false);
    expect(historyDue(written(1000, s.score, s.components, 'proven'), s, now, cadence)).toBe(true);
    // A component alone: a large move at once, a small one once the last row is old enough, a tiny one never.
    expect(historyDue(written(1000, s.score, nudged(0.03)), s, now, cadence)).toBe(true);
    expect(historyDue(written(1000, s.score, nudged(0.02)), s, now, cadence)).toBe(false);
    expect(historyDue(written(5 * 60_000, s.score, nudged(0.02)), s, now, cadence)).toBe(true);
    expect(historyDue(written(5 * 60_000, s.score, nudged(0.009)), s, now, cadence)).toBe(false);
    // A component the last row did not have (the network, once measured): at once.
    const { heartbeat: _, ...without } = s.components;
    expect(historyDue(written(1000, s.score, without), s, now, cadence)).toBe(true);
  });

  it('writes a young fleet down a few times, not at every step of its punctuality', () => {
    // A machine that joined and beats on time every 10 s, scored every 5 s for 10 minutes.
    const r = newMachineRecord('m-young', 'default');
    applyState(r, true, now, now);
    const cadence = { everyMs: 15 * 60_000, componentsMs: 5 * 60_000 };
    let prev: Parameters<typeof historyDue>[0];
    let rows = 0;
    let oldRule = 0;
    let oldPrev: { score: number; components: Record<string, number> } | undefined;
    for (let t = 0; t <= 600_000; t += 5000) {
      if (t % 10_000 === 0) applyHeartbeat(r, t / 10_000 + 1, now + t, P);
      const [s] = scoreMachines([r], now + t, P);
      if (historyDue(prev, s, now + t, cadence)) {
        rows++;
        prev = { ...s, historyAt: now + t };
      }
      // The rule before: any component moved by 0.01.
      if (!oldPrev || Object.entries(s.components).some(([k, v]) => Math.abs(oldPrev!.components[k] - v) >= 0.01)) {
        oldRule++;
        oldPrev = s;
      }
    }
    expect(oldRule).toBeGreaterThanOrEqual(6);
    expect(rows).toBeLessThanOrEqual(4);
    // What it settles on is written down within the wait.
    expect(Math.abs(prev!.components.heartbeat - scoreMachines([r], now + 600_000, P)[0].components.heartbeat)).toBeLessThan(0.01);
  });
});

describe('scoring the machines that changed', () => {
  /** A small seeded generator (mulberry32), so a failure is the same fleet on every run. */
  const random = (seed: number) => () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };

  /** Machines in three pools sharing five deployments: flapping, late beats, failures of every kind, start latencies, some network tests. */
  function randomFleet(size: number, next: () => number) {
    const outcomes = ['success', 'success', 'success', 'shared', 'machine'] as const;
    return Array.from({ length: size }, (_, i) => {
      const r = newMachineRecord(`m-${i}`, `pool-${i % 3}`);
      let at = now - 20 * DAY_MS * next();
      for (let online = true; at < now; online = !online, at += 2 * DAY_MS * next()) applyState(r, online, at, now);
      const beats = Math.floor(200 * next());
      for (let b = 0; b < beats; b++) applyHeartbeat(r, b + 1 + Math.floor(next() * 1.2), now - (beats - b) * 10_000 * (1 + next()), P);
      for (let t = 0; t < 40 * next(); t++) {
        const outcome = outcomes[Math.floor(next() * outcomes.length)];
        applyTaskOutcome(r, `t-${i}-${t}`, `d-${Math.floor(next() * 5)}`, outcome, now - 10 * DAY_MS * next(), P);
      }
      for (let c = 0; c < 10 * next(); c++) {
        const outcome = outcomes[Math.floor(next() * outcomes.length)];
        const latency = outcome === 'success' ? 500 + 20_000 * next() : undefined;
        applyStartOutcome(r, `c-${i}-${c}`, `d-${Math.floor(next() * 5)}`, outcome, now - 5 * DAY_MS * next(), P, latency);
      }
      if (next() < 0.3)
        applyMeasuredNetwork(r, { throughputMbps: 2000 * next(), latencyMs: 200 * next(), failed: next() < 0.1, testedAt: now - HOUR_MS });
      return r;
    });
  }

  it.each([1, 2, 3])('gives the changed machines the scores a pass over every machine gives them (fleet %i)', (seed) => {
    const next = random(seed);
    const fleet = randomFleet(400, next);
    const changed = fleet.filter(() => next() < 0.1);
    const everyMachine = new Map(scoreMachines(fleet, now, P).map((s) => [s.machineId, s]));

    expect(scoreMachines(fleet, now, P, changed)).toEqual(changed.map((r) => everyMachine.get(r.machineId)));
    // The peers matter: scored among themselves alone, the changed machines score otherwise.
    const amongThemselves = scoreMachines(changed, now, P);
    expect(amongThemselves.some((s) => s.score !== everyMachine.get(s.machineId)!.score)).toBe(true);
  });
});
