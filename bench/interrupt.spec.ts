import { jest } from '@jest/globals';
import { stopOnInterrupt } from './interrupt.js';

describe('stopOnInterrupt', () => {
  const listeners = () => [process.listenerCount('SIGINT'), process.listenerCount('SIGTERM')];
  let before: number[];
  beforeEach(() => (before = listeners()));
  afterEach(() => expect(listeners()).toEqual(before));

  it('on Ctrl-C runs the cleanup once, then exits 130; the finally that comes later does not run it again', async () => {
    const stop = jest.fn(() => new Promise<void>((r) => setTimeout(r, 20)));
    const exit = jest.fn<(code: number) => void>();
    const logged: string[] = [];
    const cleanup = stopOnInterrupt(stop, (m) => logged.push(m), exit);
    expect(listeners()).toEqual([before[0] + 1, before[1] + 1]);

    process.emit('SIGINT', 'SIGINT'); // as node delivers it: the signal's name as the argument
    // Still listening while it cleans up: with no listener left, execa's signal-exit would re-raise the signal.
    expect(listeners()).toEqual([before[0] + 1, before[1] + 1]);
    expect(exit).not.toHaveBeenCalled(); // not before the cleanup has finished
    await new Promise((r) => setTimeout(r, 50));
    expect(exit).toHaveBeenCalledWith(130);
    await cleanup();
    expect(stop).toHaveBeenCalledTimes(1);
    expect(logged).toEqual(['SIGINT: cleaning up before exiting (again to exit at once)']);
  });

  it('exits at once on a second Ctrl-C while the cleanup runs', async () => {
    let finish = () => undefined as void;
    const stop = jest.fn(() => new Promise<void>((r) => (finish = r)));
    const exit = jest.fn<(code: number) => void>();
    stopOnInterrupt(stop, () => undefined, exit);
    process.emit('SIGINT', 'SIGINT');
    expect(exit).not.toHaveBeenCalled();
    process.emit('SIGINT', 'SIGINT');
    expect(exit).toHaveBeenCalledWith(130);
    finish();
    await new Promise((r) => setTimeout(r, 10));
    expect(stop).toHaveBeenCalledTimes(1);
  });

  it('exits 143 on SIGTERM, also when the cleanup fails, and says so', async () => {
    const exit = jest.fn<(code: number) => void>();
    const logged: string[] = [];
    stopOnInterrupt(
      () => Promise.reject(new Error('gateway gone')),
      (m) => logged.push(m),
      exit,
    );
    process.emit('SIGTERM', 'SIGTERM');
    await new Promise((r) => setTimeout(r, 10));
    expect(exit).toHaveBeenCalledWith(143);
    expect(logged).toContain('cleanup failed: gateway gone');
  });

  it('once the bench has cleaned up by itself, a signal no longer runs the cleanup', async () => {
    const stop = jest.fn(() => Promise.resolve());
    const cleanup = stopOnInterrupt(stop, () => undefined, jest.fn());
    await cleanup();
    await cleanup();
    expect(stop).toHaveBeenCalledTimes(1);
    expect(listeners()).toEqual(before);
  });
});
