import { jest } from '@jest/globals';
import { backoffMs, fireAndForget, mapLimit, sleep, Throttle, Ticker } from './index.js';

describe('backoffMs', () => {
  it('doubles from firstMs up to maxMs, and waits nothing before a failure', () => {
    const shape = { firstMs: 500, maxMs: 3000 };
    expect([0, 1, 2, 3, 4, 5, 40].map((n) => backoffMs(n, shape))).toEqual([0, 500, 1000, 2000, 3000, 3000, 3000]);
  });

  it('grows by the factor when one is given', () => {
    const shape = { firstMs: 50, maxMs: 1000, factor: 1.5 };
    expect([1, 2, 3, 4, 8, 9].map((n) => backoffMs(n, shape))).toEqual([50, 75, 113, 169, 854, 1000]);
  });

  it('defaults to 1 s doubling up to 60 s', () => {
    expect([1, 2, 7, 8].map((n) => backoffMs(n))).toEqual([1000, 2000, 60_000, 60_000]);
  });

  it('spreads each wait by the jitter around its base', () => {
    const shape = { firstMs: 1000, maxMs: 60_000, jitter: 0.2 };
    expect(backoffMs(1, shape, () => 0)).toBe(800);
    expect(backoffMs(1, shape, () => 1)).toBe(1200);
    expect(backoffMs(3, shape, () => 0.5)).toBe(4000);
  });
});

describe('sleep', () => {
  it('ends at once when aborted', async () => {
    const abort = new AbortController();
    const t0 = Date.now();
    const slept = sleep(10_000, abort.signal);
    abort.abort();
    await slept;
    expect(Date.now() - t0).toBeLessThan(1000);
  });
});

describe('Ticker', () => {
  const quiet = { warn: jest.fn() };

  it('never overlaps ticks, and stop() waits for the running one', async () => {
    let active = 0;
    let most = 0;
    let finished = 0;
    const ticker = new Ticker({ name: 't', everyMs: 5, logger: quiet }, async () => {
      most = Math.max(most, ++active);
      await sleep(30);
      active--;
      finished++;
    }).start();
    await sleep(100);
    await ticker.stop();
    const after = finished;
    expect(most).toBe(1);
    expect(active).toBe(0);
    expect(after).toBeGreaterThan(0);
    await sleep(50);
    expect(finished).toBe(after);
  });

  it('logs a failed tick and keeps ticking', async () => {
    const logger = { warn: jest.fn() };
    let n = 0;
    const ticker = new Ticker({ name: 'sweep', everyMs: 5, logger }, () => {
      n++;
      throw new Error('boom');
    }).start();
    await waitUntil(() => n > 1);
    await ticker.stop();
    expect(logger.warn).toHaveBeenCalledWith('sweep failed: boom');
  });

  it('runs at once when immediate, and once more after the running tick when poked', async () => {
    let n = 0;
    const releases: (() => void)[] = [];
    const ticker = new Ticker({ name: 't', everyMs: 60_000, logger: quiet, immediate: true }, async () => {
      n++;
      await new Promise<void>((release) => releases.push(release));
    }).start();
    ticker.poke();
    ticker.poke();
    await sleep(10);
    // The first tick still runs: the two pokes wait for it and make one more, not two.
    expect(n).toBe(1);
    releases.shift()!();
    await waitUntil(() => n === 2);
    releases.shift()!();
    await ticker.current;
    await sleep(10);
    expect(n).toBe(2);
    await ticker.stop();
  });
});

async function waitUntil(done: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !done(); i++) await sleep(5);
  expect(done()).toBe(true);
}

describe('fireAndForget', () => {
  it('logs the failure with what failed', async () => {
    const logger = { warn: jest.fn() };
    fireAndForget('sending the report', logger, Promise.reject(new Error('no route')));
    fireAndForget('a thrown start', logger, async () => {
      throw new Error('bad');
    });
    await sleep(10);
    expect(logger.warn).toHaveBeenCalledWith('sending the report failed: no route');
    expect(logger.warn).toHaveBeenCalledWith('a thrown start failed: bad');
  });
});

describe('mapLimit', () => {
  it('keeps the order and never runs more than the limit at once', async () => {
    let running = 0;
    let most = 0;
    const answers = await mapLimit([5, 1, 4, 2, 3], 2, async (n) => {
      most = Math.max(most, ++running);
      await new Promise((r) => setTimeout(r, n * 5));
      running--;
      return n * 10;
    });
    expect(answers).toEqual([50, 10, 40, 20, 30]);
    expect(most).toBe(2);
  });
});

describe('Throttle', () => {
  beforeEach(() => jest.useFakeTimers({ now: 1_000_000 }));
  afterEach(() => jest.useRealTimers());

  it('calls at once after a quiet spell, and folds the calls within the gap into one at its end', () => {
    const fn = jest.fn();
    const throttle = new Throttle(200, fn);
    throttle.call();
    expect(fn).toHaveBeenCalledTimes(1);
    for (let i = 0; i < 10; i++) {
      jest.advanceTimersByTime(10);
      throttle.call();
    }
    expect(fn).toHaveBeenCalledTimes(1);
    jest.advanceTimersByTime(99);
    expect(fn).toHaveBeenCalledTimes(1);
    jest.advanceTimersByTime(1); // 200 ms after the first
    expect(fn).toHaveBeenCalledTimes(2);
    jest.advanceTimersByTime(1000);
    expect(fn).toHaveBeenCalledTimes(2);
    throttle.call();
    expect(fn).toHaveBeenCalledTimes(3);
  });

  it('drops the folded call when stopped', () => {
    const fn = jest.fn();
    const throttle = new Throttle(200, fn);
    throttle.call();
    throttle.call();
    throttle.stop();
    jest.advanceTimersByTime(1000);
    expect(fn).toHaveBeenCalledTimes(1);
  });
});
