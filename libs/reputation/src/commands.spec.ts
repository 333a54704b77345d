import { meanLatency } from './latency.js';
import { DEFAULT_PARAMS as P, HOUR_MS } from './params.js';
import { applyObservedReady, applyStartCommand, commandedAt, newMachineRecord } from './record.js';

const t0 = Date.parse('2026-03-01T00:00:00Z');

describe('start latency from the start command', () => {
  it('measures from the observed command to the observed ready, once', () => {
    const r = newMachineRecord('m1');
    applyStartCommand(r, 'c1', t0);
    expect(applyObservedReady(r, 'c1', 'd1', t0 + 4_000, P)).toBe(true);
    expect(meanLatency(r.latency, t0 + 4_000, P)?.meanMs).toBeCloseTo(4_000, 6);
    expect(r.starts.d1).toBeDefined();
    // Counted once: the command is spent, and the start's key is seen.
    expect(applyObservedReady(r, 'c1', 'd1', t0 + 5_000, P)).toBe(false);
  });

  it('counts nothing for a ready no start command was seen for on that machine', () => {
    const r = newMachineRecord('m1');
    applyStartCommand(r, 'c-elsewhere', t0);
    expect(applyObservedReady(r, 'c-mine?', 'd1', t0 + 10, P)).toBe(false);
    expect(r.latency).toBeNull();
    expect(r.starts).toEqual({});
  });

  it('keeps the first sighting of a command and forgets commands older than a day', () => {
    const r = newMachineRecord('m1');
    applyStartCommand(r, 'c1', t0);
    applyStartCommand(r, 'c1', t0 + 1_000);
    expect(commandedAt(r, 'c1')).toBe(t0);
    applyStartCommand(r, 'c2', t0 + 25 * HOUR_MS);
    expect(commandedAt(r, 'c1')).toBeUndefined();
    expect(commandedAt(r, 'c2')).toBe(t0 + 25 * HOUR_MS);
  });

  it('reads a record stored before commands were kept', () => {
    const { commands: _, ...old } = newMachineRecord('m1');
    const r = { ...newMachineRecord('m1'), ...old };
    applyStartCommand(r, 'c1', t0);
    expect(commandedAt(r, 'c1')).toBe(t0);
  });
});
