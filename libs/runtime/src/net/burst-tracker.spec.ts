import { BurstTracker } from './burst-tracker.js';

describe('BurstTracker', () => {
  it('counts events within the gap as one burst and remembers the largest', () => {
    const t = new BurstTracker(10_000, 60_000);
    expect(t.peak(0)).toBe(0);
    t.note(0);
    t.note(500);
    t.note(9_000);
    expect(t.peak(9_000)).toBe(3);
    // A lone start later is a burst of one; the earlier burst of three still sets the peak.
    t.note(30_000);
    expect(t.peak(30_000)).toBe(3);
  });

  it('forgets a burst once it is older than the memory', () => {
    const t = new BurstTracker(10_000, 60_000);
    t.note(0);
    t.note(1_000);
    t.note(100_000);
    expect(t.peak(100_000)).toBe(1);
    expect(t.peak(200_000)).toBe(0);
  });
});
