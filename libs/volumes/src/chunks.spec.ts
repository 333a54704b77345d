import { inParallel } from './chunks.js';

describe('inParallel', () => {
  it('runs at most `limit` at once and every item once', async () => {
    let running = 0;
    let most = 0;
    const seen: number[] = [];
    await inParallel([1, 2, 3, 4, 5, 6, 7], 3, async (n) => {
      most = Math.max(most, ++running);
      await new Promise((r) => setTimeout(r, 5));
      seen.push(n);
      running--;
    });
    expect(most).toBe(3);
    expect(seen.sort()).toEqual([1, 2, 3, 4, 5, 6, 7]);
  });

  it('throws the first failure only once the work in flight has settled, and starts nothing after it', async () => {
    const finished: number[] = [];
    const started: number[] = [];
    const run = inParallel([1, 2, 3, 4, 5, 6], 3, async (n) => {
      started.push(n);
      if (n === 1) throw new Error('store gone');
      await new Promise((r) => setTimeout(r, 30));
      finished.push(n);
    });
    await expect(run).rejects.toThrow('store gone');
    // 2 and 3 were in flight when 1 failed: both ended before the error reached the caller.
    expect(finished.sort()).toEqual([2, 3]);
    expect(started.sort()).toEqual([1, 2, 3]);
  });
});
