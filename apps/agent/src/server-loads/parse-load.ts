import { usableLoad } from '#tern/autoscaling';

/** The most of a load answer read: a /metrics page is small; anything bigger is not worth the agent's memory. */
export const LOAD_BODY_MAX_BYTES = 256 * 1024;

/**
 * A container's answer at its load path as a load: `{"load": n}` or a bare number, or with a
 * metric, Prometheus text whose samples of that metric are summed (vLLM's
 * `vllm:num_requests_waiting{model_name="…"} 3`). Undefined when the answer holds nothing
 * usable (no such metric, not a number, negative, infinite); huge values are capped.
 */
export function parseServerLoad(body: string, metric?: string): number | undefined {
  if (metric) return usableLoad(prometheusSum(body, metric));
  try {
    const parsed: unknown = JSON.parse(body);
    const value = typeof parsed === 'object' && parsed !== null ? (parsed as { load?: unknown }).load : parsed;
    return typeof value === 'number' ? usableLoad(value) : undefined;
  } catch {
    return undefined;
  }
}

function prometheusSum(body: string, metric: string): number | undefined {
  let sum: number | undefined;
  for (const raw of body.split('\n')) {
    const line = raw.trim();
    if (!line.startsWith(metric) || line.startsWith('#')) continue;
    const rest = line.slice(metric.length);
    // The exact name: `name 3` or `name{labels} 3`, never `name_total 3`.
    let value: string | undefined;
    if (rest.startsWith('{')) {
      const close = rest.lastIndexOf('}');
      if (close < 0) continue;
      value = rest
        .slice(close + 1)
        .trim()
        .split(/\s+/)[0];
    } else if (/^\s/.test(rest)) value = rest.trim().split(/\s+/)[0];
    const n = value === undefined ? Number.NaN : Number(value);
    if (!Number.isFinite(n) || n < 0) continue;
    sum = (sum ?? 0) + n;
  }
  return sum;
}
