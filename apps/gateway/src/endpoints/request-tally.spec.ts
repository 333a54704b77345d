import { quantileOf, REQUEST_SECONDS_BUCKETS, RequestTally } from './request-tally.js';
import { requestHistory } from '../deployments/request-history.js';

describe('request tally', () => {
  const at = new Date('2026-01-01T12:00:30Z');

  it('counts per version and minute, 5xx as errors, each latency in its bucket', () => {
    const tally = new RequestTally();
    tally.add('d', 1, at, 0.004, 200);
    tally.add('d', 1, at, 0.2, 503);
    tally.add('d', 1, new Date('2026-01-01T12:01:00Z'), 120, 200);
    tally.add('d', 2, at, 0.01, 200);
    const rows = tally.drain();
    expect(rows.map((r) => [r.version, r.minute.toISOString(), r.requests, r.errors])).toEqual([
      [1, '2026-01-01T12:00:00.000Z', 2, 1],
      [1, '2026-01-01T12:01:00.000Z', 1, 0],
      [2, '2026-01-01T12:00:00.000Z', 1, 0],
    ]);
    expect(rows[0].buckets[0]).toBe(1);
    expect(rows[0].buckets[REQUEST_SECONDS_BUCKETS.indexOf(0.25)]).toBe(1);
    expect(rows[1].buckets.at(-1)).toBe(1);
    expect(tally.drain()).toEqual([]);
  });

  it('keeps what a failed write did not store for the next drain', () => {
    const tally = new RequestTally();
    tally.add('d', 1, at, 0.004, 200);
    const failed = tally.drain();
    tally.add('d', 1, at, 0.004, 500);
    tally.restore(failed);
    expect(tally.drain().map((r) => [r.requests, r.errors, r.buckets[0]])).toEqual([[2, 1, 2]]);
  });

  it('interpolates percentiles inside the bucket that holds them, as histogram_quantile does', () => {
    const buckets = new Array<number>(REQUEST_SECONDS_BUCKETS.length + 1).fill(0);
    expect(quantileOf(buckets, 0.5)).toBeNull();
    buckets[0] = 50; // ≤ 5 ms
    buckets[4] = 50; // 50–100 ms
    expect(quantileOf(buckets, 0.5)).toBeCloseTo(0.005);
    expect(quantileOf(buckets, 0.9)).toBeCloseTo(0.05 + 0.05 * (40 / 50));
    buckets[buckets.length - 1] = 100; // beyond the last bound
    expect(quantileOf(buckets, 0.99)).toBe(60);
  });

  it('answers every minute of the window, zeros and nulls where nothing was stored', () => {
    const from = new Date('2026-01-01T12:00:00Z');
    const h = requestHistory('hello', { from, to: new Date('2026-01-01T12:03:00Z') }, [
      { minute: new Date('2026-01-01T12:01:00Z'), requests: 2, errors: 1, buckets: [2, ...new Array<number>(13).fill(0)] },
    ]);
    expect(h.series.map((p) => [p.at.slice(11, 16), p.requests, p.errors, p.p50])).toEqual([
      ['12:00', 0, 0, null],
      ['12:01', 2, 1, 0.0025],
      ['12:02', 0, 0, null],
    ]);
  });
});
