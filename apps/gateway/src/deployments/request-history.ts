import type { RequestHistory } from '#tern/contracts';
import type { RequestMinute } from '#tern/persistence';
import { quantileOf } from '../endpoints/request-tally.js';

/** The stored minutes as the API's series: every minute of [from, to) present, percentiles from the summed buckets. */
export function requestHistory(
  deployment: string,
  window: { from: Date; to: Date },
  minutes: Pick<RequestMinute, 'minute' | 'requests' | 'errors' | 'buckets'>[],
): RequestHistory {
  const stored = new Map(minutes.map((m) => [new Date(m.minute).getTime(), m]));
  const series: RequestHistory['series'] = [];
  for (let t = window.from.getTime(); t < window.to.getTime(); t += 60_000) {
    const m = stored.get(t);
    series.push({
      at: new Date(t).toISOString(),
      requests: m?.requests ?? 0,
      errors: m?.errors ?? 0,
      p50: m ? quantileOf(m.buckets, 0.5) : null,
      p95: m ? quantileOf(m.buckets, 0.95) : null,
      p99: m ? quantileOf(m.buckets, 0.99) : null,
    });
  }
  return { deployment, from: window.from.toISOString(), to: window.to.toISOString(), series };
}
