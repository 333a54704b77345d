import { scaleHistory } from './scale-history.js';

describe('scale history', () => {
  const from = new Date('2026-01-01T12:00:00Z');
  const to = new Date('2026-01-01T13:00:00Z');
  const at = (minute: number) => new Date(from.getTime() + minute * 60_000);

  it('sums desired over versions from where the window starts and counts ready containers up and down', () => {
    const h = scaleHistory(
      'squares',
      { from, to },
      {
        desiredAtStart: 1,
        readyAtStart: 1,
        steps: [
          { kind: 'desired', at: at(1), version: 1, value: 3, previous: 1, reason: 'load 25' },
          { kind: 'up', at: at(2), version: 1, value: 1, previous: null, reason: null },
          { kind: 'desired', at: at(3), version: 2, value: 1, previous: 0, reason: 'new version' },
          { kind: 'desired', at: at(4), version: 1, value: 0, previous: 3, reason: 'idle' },
          { kind: 'down', at: at(5), version: 1, value: 1, previous: null, reason: 'scaled down' },
        ],
      },
    );
    expect(h.series.map((p) => [p.desired, p.ready])).toEqual([
      [1, 1],
      [3, 1],
      [3, 2],
      [4, 2],
      [1, 2],
      [1, 1],
      [1, 1],
    ]);
    expect(h.series[0].at).toBe(from.toISOString());
    expect(h.series.at(-1)!.at).toBe(to.toISOString());
    expect(h.events.map((e) => [e.version, e.previous, e.desired, e.reason])).toEqual([
      [1, 1, 3, 'load 25'],
      [2, 0, 1, 'new version'],
      [1, 3, 0, 'idle'],
    ]);
  });
});
