import type { RequestMinute } from '#tern/persistence';

/** Upper bounds (seconds) of the latency buckets, for Prometheus and for the stored minutes; +Inf follows. */
export const REQUEST_SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** A minute of one version as the tally counts it: the row it adds to (buckets: REQUEST_SECONDS_BUCKETS, then +Inf). */
export type TalliedMinute = RequestMinute;

/** Endpoint requests counted per deployment version and minute since the last drain (one gateway's share). */
export class RequestTally {
  private readonly minutes = new Map<string, TalliedMinute>();

  add(deploymentId: string, version: number, at: Date, seconds: number, status: number): void {
    const minute = new Date(Math.floor(at.getTime() / 60_000) * 60_000);
    const key = `${deploymentId}.${version}.${minute.getTime()}`;
    let m = this.minutes.get(key);
    if (!m) this.minutes.set(key, (m = { deploymentId, version, minute, requests: 0, errors: 0, buckets: bucketsZero() }));
    m.requests++;
    if (status >= 500) m.errors++;
    const i = REQUEST_SECONDS_BUCKETS.findIndex((bound) => seconds <= bound);
    m.buckets[i < 0 ? REQUEST_SECONDS_BUCKETS.length : i]++;
  }

  /** What was counted since the last drain; the tally starts again empty. */
  drain(): TalliedMinute[] {
    const rows = [...this.minutes.values()];
    this.minutes.clear();
    return rows;
  }

  /** Puts back rows a failed write did not store, to go with the next drain. */
  restore(rows: TalliedMinute[]): void {
    for (const r of rows) {
      const key = `${r.deploymentId}.${r.version}.${r.minute.getTime()}`;
      const m = this.minutes.get(key);
      if (!m) this.minutes.set(key, r);
      else {
        m.requests += r.requests;
        m.errors += r.errors;
        r.buckets.forEach((n, i) => (m.buckets[i] += n));
      }
    }
  }
}

function bucketsZero(): number[] {
  return new Array<number>(REQUEST_SECONDS_BUCKETS.length + 1).fill(0);
}

/**
 * The q-quantile (0..1) of latencies counted in buckets, interpolated linearly inside the bucket
 * that holds it (as Prometheus's histogram_quantile does); null without requests. A quantile in
 * the +Inf bucket answers the highest bound.
 */
export function quantileOf(buckets: number[], q: number): number | null {
  const total = buckets.reduce((a, b) => a + b, 0);
  if (!total) return null;
  const rank = q * total;
  let seen = 0;
  for (let i = 0; i < buckets.length; i++) {
    if (seen + buckets[i] >= rank && buckets[i] > 0) {
      if (i >= REQUEST_SECONDS_BUCKETS.length) return REQUEST_SECONDS_BUCKETS[REQUEST_SECONDS_BUCKETS.length - 1];
      const lower = i === 0 ? 0 : REQUEST_SECONDS_BUCKETS[i - 1];
      return lower + (REQUEST_SECONDS_BUCKETS[i] - lower) * ((rank - seen) / buckets[i]);
    }
    seen += buckets[i];
  }
  return REQUEST_SECONDS_BUCKETS[REQUEST_SECONDS_BUCKETS.length - 1];
}
