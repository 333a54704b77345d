import { retryDelayMs } from '#tern/messaging';
import { lostLastAttempt, willRetry } from './retry-rule.js';

describe('task retry rule', () => {
  it('retries until max_retries + 1 attempts have run', () => {
    expect([1, 2, 3, 4].map((a) => willRetry(a, 3))).toEqual([true, true, true, false]);
    expect(willRetry(1, 0)).toBe(false);
  });

  it('records a delivery past the last attempt as the loss of that attempt', () => {
    expect(lostLastAttempt(4, 3)).toBe(false);
    expect(lostLastAttempt(5, 3)).toBe(true);
  });

  it('backs off 1, 2, 4 ... seconds, at most a minute', () => {
    expect([1, 2, 3].map(retryDelayMs)).toEqual([1000, 2000, 4000]);
    expect(retryDelayMs(20)).toBe(60_000);
  });
});
