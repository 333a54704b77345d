import { boundAttempt } from './task-attempts.js';

describe('boundAttempt', () => {
  const start = 1_000_000;

  it('keeps an honest claim as it is', () => {
    expect(boundAttempt({ startedAt: start, observedAt: start + 5_050, claimedEndedAt: start + 5_000, claimedDurationMs: 5_000 })).toEqual({
      endedAt: start + 5_000,
      durationMs: 5_000,
    });
  });

  it('ends an attempt no later than its outcome reached NATS, and no longer than observed', () => {
    const day = 86_400_000;
    expect(boundAttempt({ startedAt: start, observedAt: start + 2_000, claimedEndedAt: start + day, claimedDurationMs: day })).toEqual({
      endedAt: start + 2_000,
      durationMs: 2_000,
    });
  });

  it('never ends an attempt before its observed start (a backdated end, or a clock behind)', () => {
    expect(
      boundAttempt({ startedAt: start, observedAt: start + 3_000, claimedEndedAt: start - 60_000, claimedDurationMs: 90_000 }),
    ).toEqual({
      endedAt: start,
      durationMs: 0,
    });
  });

  it('takes a shorter duration the agent claims, and the observed span when it claims none', () => {
    expect(
      boundAttempt({ startedAt: start, observedAt: start + 4_000, claimedEndedAt: start + 4_000, claimedDurationMs: 1_500 }).durationMs,
    ).toBe(1_500);
    expect(boundAttempt({ startedAt: start, observedAt: start + 4_000, claimedEndedAt: start + 4_000 }).durationMs).toBe(4_000);
  });

  it('gives no duration when no start was observed, and reads an unreadable end as the observation', () => {
    expect(boundAttempt({ startedAt: null, observedAt: start, claimedEndedAt: Number.NaN, claimedDurationMs: 9_999 })).toEqual({
      endedAt: start,
    });
  });
});
