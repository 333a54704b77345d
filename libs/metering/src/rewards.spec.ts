import { computeRewards, NEUTRAL_SCORE } from './rewards.js';

describe('computeRewards', () => {
  it('shares GPU-seconds weighted by reputation, summing to 1', () => {
    const rewards = computeRewards(
      [
        { machineId: 'a', gpuSeconds: 3600, score: 1 },
        { machineId: 'b', gpuSeconds: 3600, score: 0.5 },
        { machineId: 'c', gpuSeconds: 0, score: 0.9 },
      ],
      300,
    );
    expect(rewards.map((r) => [r.machineId, r.share, r.reward])).toEqual([
      ['a', 2 / 3, 200],
      ['b', 1 / 3, 100],
      ['c', 0, 0],
    ]);
    expect(rewards.reduce((s, r) => s + r.share, 0)).toBeCloseTo(1, 12);
  });

  it('a machine without a score counts as neutral; scores outside [0, 1] are clamped', () => {
    const rewards = computeRewards([
      { machineId: 'new', gpuSeconds: 100, score: null },
      { machineId: 'odd', gpuSeconds: 100, score: 7 },
      { machineId: 'bad', gpuSeconds: 100, score: -1 },
    ]);
    expect(rewards.find((r) => r.machineId === 'new')?.score).toBe(NEUTRAL_SCORE);
    expect(rewards.find((r) => r.machineId === 'odd')?.score).toBe(1);
    expect(rewards.find((r) => r.machineId === 'bad')?.share).toBe(0);
    expect(rewards[0].reward).toBeUndefined();
  });

  it('nobody served a GPU: every share is 0, not NaN', () => {
    expect(computeRewards([{ machineId: 'a', gpuSeconds: 0, score: 1 }])[0].share).toBe(0);
  });

  it('refuses a negative amount', () => {
    expect(() => computeRewards([], -1)).toThrow('amount must be a number ≥ 0');
  });
});
