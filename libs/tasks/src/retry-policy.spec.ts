import { MAX_TASK_RETRIES, TASK_FAILURE_CAUSES } from '#tern/contracts';
import { afterFailure, compileRetryPolicy, finalStateAfter, isPastLastAttempt, TASK_MAX_DELIVER } from './retry-policy.js';

describe('task retry policy', () => {
  const three = compileRetryPolicy({ maxRetries: 3 });

  it('compiles max_retries into the bound on attempts, once, frozen', () => {
    expect(three).toMatchObject({ maxRetries: 3, maxAttempts: 4, backoff: { firstMs: 1000, maxMs: 60_000 } });
    expect(Object.isFrozen(three)).toBe(true);
    expect(compileRetryPolicy({ maxRetries: 0 }).maxAttempts).toBe(1);
  });

  it.each([-1, 1.5, MAX_TASK_RETRIES + 1, Number.NaN])('refuses max_retries %p', (maxRetries) => {
    expect(() => compileRetryPolicy({ maxRetries })).toThrow(`max_retries must be a whole number from 0 to ${MAX_TASK_RETRIES}`);
  });

  it('retries until max_retries + 1 attempts have run, whatever the cause', () => {
    for (const cause of TASK_FAILURE_CAUSES)
      expect([1, 2, 3, 4].map((a) => afterFailure(three, a, cause).retry)).toEqual([true, true, true, false]);
    expect(afterFailure(compileRetryPolicy({ maxRetries: 0 }), 1, 'error')).toEqual({ retry: false });
  });

  it('backs off 1, 2, 4 … seconds after an error or a timeout, at most a minute', () => {
    const ten = compileRetryPolicy({ maxRetries: MAX_TASK_RETRIES });
    for (const cause of ['error', 'timeout'] as const) {
      expect([1, 2, 3].map((a) => afterFailure(ten, a, cause))).toEqual([1000, 2000, 4000].map((delayMs) => ({ retry: true, delayMs })));
      expect(afterFailure(ten, 7, cause)).toEqual({ retry: true, delayMs: 60_000 });
    }
  });

  it('runs an attempt lost with its container again at once', () => {
    expect(afterFailure(three, 2, 'container-lost')).toEqual({ retry: true, delayMs: 0 });
  });

  it('takes a delivery past the last attempt for the loss of that attempt', () => {
    expect([4, 5, 6].map((d) => isPastLastAttempt(three, d))).toEqual([false, true, true]);
    expect(isPastLastAttempt(compileRetryPolicy({ maxRetries: 0 }), 2)).toBe(true);
  });

  it('ends a task TIMEOUT after a last attempt that timed out, ERROR otherwise', () => {
    expect(TASK_FAILURE_CAUSES.map(finalStateAfter)).toEqual(['ERROR', 'TIMEOUT', 'ERROR']);
  });

  it('lets JetStream deliver a task once more than the most attempts allowed, to report the last one lost', () => {
    const most = compileRetryPolicy({ maxRetries: MAX_TASK_RETRIES });
    expect(isPastLastAttempt(most, TASK_MAX_DELIVER)).toBe(true);
    expect(isPastLastAttempt(most, TASK_MAX_DELIVER - 1)).toBe(false);
  });
});
