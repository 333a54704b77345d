import { GroupCommit } from './group-commit.js';

/** A write that records each statement's items and answers them doubled, after a turn of the event loop. */
function doubling(fail?: (items: number[]) => boolean, keyOf?: (item: number) => string, lingerMs?: number) {
  const statements: number[][] = [];
  const commit = new GroupCommit<number, number>(
    async (items) => {
      statements.push(items);
      await new Promise((r) => setTimeout(r, 5));
      if (fail?.(items)) throw new Error(`refused ${items.join(',')}`);
      return items.map((i) => i * 2);
    },
    { maxBatch: 4, keyOf, lingerMs },
  );
  return { statements, commit };
}

describe('GroupCommit', () => {
  it('writes an idle caller alone and at once', async () => {
    const { statements, commit } = doubling();
    expect(await commit.add(1)).toBe(2);
    expect(statements).toEqual([[1]]);
  });

  it('carries the writes that arrive while one is in flight in one statement, each caller getting its own answer', async () => {
    const { statements, commit } = doubling();
    const first = commit.add(1);
    await new Promise((r) => setImmediate(r));
    const rest = [2, 3, 4].map((i) => commit.add(i));
    expect(await Promise.all([first, ...rest])).toEqual([2, 4, 6, 8]);
    expect(statements).toEqual([[1], [2, 3, 4]]);
  });

  it('never puts more than maxBatch items in one statement', async () => {
    const { statements, commit } = doubling();
    expect(await Promise.all([1, 2, 3, 4, 5, 6].map((i) => commit.add(i)))).toEqual([2, 4, 6, 8, 10, 12]);
    expect(statements).toEqual([
      [1, 2, 3, 4],
      [5, 6],
    ]);
  });

  it('puts items with the same key in separate statements, in the order they came', async () => {
    const { statements, commit } = doubling(undefined, (i) => String(i % 10));
    expect(await Promise.all([1, 11, 2, 21, 3].map((i) => commit.add(i)))).toEqual([2, 22, 4, 42, 6]);
    expect(statements).toEqual([[1, 2, 3], [11], [21]]);
  });

  it("with a linger, holds an idle caller's write that long and carries the writes arriving meanwhile in it", async () => {
    const { statements, commit } = doubling(undefined, undefined, 100);
    const t0 = performance.now();
    const first = commit.add(1);
    // Without a linger the write would have gone by now (see the first test).
    await new Promise((r) => setImmediate(r));
    expect(statements).toEqual([]);
    const second = commit.add(2);
    expect(await Promise.all([first, second])).toEqual([2, 4]);
    expect(statements).toEqual([[1, 2]]);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(98);
  });

  it('fails only the item a failed statement was refused for, writing the others again one by one', async () => {
    const { statements, commit } = doubling((items) => items.includes(2));
    const outcomes = await Promise.allSettled([1, 2, 3].map((i) => commit.add(i)));
    expect(outcomes.map((o) => (o.status === 'fulfilled' ? o.value : (o.reason as Error).message))).toEqual([2, 'refused 2', 6]);
    expect(statements).toEqual([[1, 2, 3], [1], [2], [3]]);
  });
});
