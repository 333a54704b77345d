import { CRASH_BACKOFF, crashResetMs, crashWaitMs, isCrashLooping } from './crash-loop.js';

/**
 * A version whose every container crashes `crashAfterMs` after its start, reconciled every
 * `tickMs`: the start times the back-off allows within `windowMs`.
 */
function startsOfCrashLoop(shape = CRASH_BACKOFF, windowMs = 120_000, crashAfterMs = 300, tickMs = 1000): number[] {
  const starts: number[] = [];
  const state = { crashes: 0, lastCrashAt: null as Date | null };
  for (let now = 0; now < windowMs; now += tickMs) {
    if (starts.length && (state.lastCrashAt?.getTime() ?? -1) < starts.at(-1)!) {
      const crashAt = starts.at(-1)! + crashAfterMs;
      if (crashAt > now) continue;
      state.crashes++;
      state.lastCrashAt = new Date(crashAt);
    }
    if (crashWaitMs(state, now, shape) === 0) starts.push(now);
  }
  return starts;
}

describe('crash-loop back-off', () => {
  it('waits 1 s after the first crash, doubling, capped at 5 minutes', () => {
    const at = new Date(0);
    expect([1, 2, 3, 4, 9, 10, 30].map((crashes) => crashWaitMs({ crashes, lastCrashAt: at }, 0, CRASH_BACKOFF))).toEqual([
      1000, 2000, 4000, 8000, 256_000, 300_000, 300_000,
    ]);
    expect(crashWaitMs({ crashes: 3, lastCrashAt: at }, 1500, CRASH_BACKOFF)).toBe(2500);
    expect(crashWaitMs({ crashes: 0, lastCrashAt: null }, 0, CRASH_BACKOFF)).toBe(0);
  });

  it('makes at most 8 container starts of a crashing server in its first 2 minutes (7 here), where one a second made 60', () => {
    const starts = startsOfCrashLoop();
    expect(starts.length).toBeLessThanOrEqual(8);
    expect(starts).toEqual([0, 2000, 5000, 10_000, 19_000, 36_000, 69_000]);
  });

  it('keeps the same count over a proportionally shorter window when the shape is scaled down', () => {
    const scaled = { firstMs: 100, maxMs: 30_000 };
    expect(startsOfCrashLoop(scaled, 12_000, 30, 100)).toEqual(startsOfCrashLoop().map((t) => t / 10));
  });

  it('forgets a loop once it has gone the reset (twice the cap, at least 10 minutes) without a crash', () => {
    const s = { crashes: 9, lastCrashAt: new Date(0) };
    expect(crashResetMs(CRASH_BACKOFF)).toBe(600_000);
    expect(crashResetMs({ firstMs: 1000, maxMs: 3_600_000 })).toBe(7_200_000);
    expect(isCrashLooping(s, 599_999, CRASH_BACKOFF)).toBe(true);
    expect(isCrashLooping(s, 600_000, CRASH_BACKOFF)).toBe(false);
    expect(crashWaitMs(s, 600_000, CRASH_BACKOFF)).toBe(0);
  });
});
