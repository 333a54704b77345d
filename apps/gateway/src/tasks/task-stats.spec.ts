import { statsWindow, taskStats } from './task-stats.js';

describe('task stats', () => {
  const window = statsWindow(new Date('2026-01-01T12:02:30Z'), 3);
  const none = { p50: null, p95: null, p99: null };

  it('cuts the window into whole minutes ending with the one that holds now', () => {
    expect(window).toEqual({ from: new Date('2026-01-01T12:00:00Z'), to: new Date('2026-01-01T12:03:00Z'), stepSeconds: 60 });
  });

  it('answers every minute, zeros included, and counts ERROR and TIMEOUT as failed', () => {
    const stats = taskStats(
      [
        { kind: 'submitted', at: new Date('2026-01-01T12:00:00Z'), state: null, count: 5 },
        { kind: 'ended', at: new Date('2026-01-01T12:02:00Z'), state: 'COMPLETE', count: 3 },
        { kind: 'ended', at: new Date('2026-01-01T12:02:00Z'), state: 'ERROR', count: 1 },
        { kind: 'ended', at: new Date('2026-01-01T12:02:00Z'), state: 'TIMEOUT', count: 1 },
        { kind: 'ended', at: new Date('2026-01-01T12:02:00Z'), state: 'CANCELLED', count: 7 },
        { kind: 'now', at: null, state: 'COMPLETE', count: 3 },
        { kind: 'now', at: null, state: 'PENDING', count: 2 },
      ],
      window,
      'squares',
      none,
    );
    expect(stats.series).toEqual([
      { at: '2026-01-01T12:00:00.000Z', submitted: 5, completed: 0, failed: 0 },
      { at: '2026-01-01T12:01:00.000Z', submitted: 0, completed: 0, failed: 0 },
      { at: '2026-01-01T12:02:00.000Z', submitted: 0, completed: 3, failed: 2 },
    ]);
    expect(stats.states).toEqual({ COMPLETE: 3, PENDING: 2 });
    expect(stats.deployment).toBe('squares');
  });
});
