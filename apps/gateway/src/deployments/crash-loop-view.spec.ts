import { crashLoopView } from './crash-loop-view.js';

const shape = { firstMs: 1000, maxMs: 300_000 };
const lastCrash = { containerId: 'c-1', phase: 'runtime', error: 'exited with code 3', exitCode: 3, lastLines: ['! boom'] };

describe('crashLoopView', () => {
  it('shows a version in a loop with its last crash and when it starts again', () => {
    const at = new Date('2026-11-27T21:00:00Z');
    expect(crashLoopView({ crashCount: 3, lastCrashAt: at, lastCrash }, shape, at.getTime() + 1000)).toEqual({
      state: 'CrashLoopBackOff',
      crashes: 3,
      lastCrashAt: '2026-11-27T21:00:00.000Z',
      nextStartAt: '2026-11-27T21:00:04.000Z',
      phase: 'runtime',
      error: 'exited with code 3',
      exitCode: 3,
      lastLines: ['! boom'],
    });
  });

  it('shows nothing for a version that never crashed, or not for longer than the reset', () => {
    expect(crashLoopView({ crashCount: 0, lastCrashAt: null, lastCrash: null }, shape)).toBeNull();
    const at = new Date('2026-11-27T21:00:00Z');
    expect(crashLoopView({ crashCount: 5, lastCrashAt: at, lastCrash }, shape, at.getTime() + 600_000)).toBeNull();
  });
});
