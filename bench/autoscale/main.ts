/**
 * Autoscaling policies side by side: replays each arrival trace (steady, step, periodic bursts,
 * Poisson with spikes) against queue_depth, request_latency and predictive in the simulator of
 * libs/autoscaling (the real decide(), containers with a cold start) and prints, per trace and
 * policy, the wait before a task starts (p50/p95), the share started within the latency target,
 * container-seconds and scale events, then the best policy per trace. Pure computation, seeded:
 * the same flags print the same table. Not a test.
 *
 *   npm run build && node dist/bench/autoscale/main.js [--seed 1] [--cold-start 20] [--seconds 1800]
 *     [--workers 4] [--service 5] [--target 10] [--keep-warm 10] [--max 50] [--infer-arrivals]
 */
import { benchArgs } from '../args.js';
import { type ScalingPolicy, type SimulationResult, simulate, standardTraces } from '#tern/autoscaling';

const values = benchArgs(
  `Usage: node dist/bench/autoscale/main.js [--seed 1] [--cold-start 20] [--seconds 1800]
    [--workers 4] [--service 5] [--target 10] [--keep-warm 10] [--max 50] [--infer-arrivals]`,
  {
    seed: { type: 'string', default: '1' },
    'cold-start': { type: 'string', default: '20' },
    seconds: { type: 'string', default: '1800' },
    workers: { type: 'string', default: '4' },
    service: { type: 'string', default: '5' },
    target: { type: 'string', default: '10' },
    'keep-warm': { type: 'string', default: '10' },
    max: { type: 'string', default: '50' },
    'infer-arrivals': { type: 'boolean', default: false },
  },
);
const num = (name: keyof typeof values): number => {
  const n = Number(values[name]);
  if (!Number.isFinite(n) || n < 0) throw new Error(`--${name} must be a non-negative number (got ${String(values[name])})`);
  return n;
};
const seed = num('seed');
const coldStartSeconds = num('cold-start');
const workers = Math.max(1, Math.floor(num('workers')));
const target = num('target');
const base = { minContainers: 0, maxContainers: Math.max(1, num('max')), tasksPerContainer: workers, keepWarmSeconds: num('keep-warm') };
const policies: ScalingPolicy[] = [
  { ...base, type: 'queue_depth' },
  { ...base, type: 'request_latency', desiredLatencySeconds: target },
  { ...base, type: 'predictive', desiredLatencySeconds: target },
];
const traces = standardTraces({ seed, seconds: num('seconds'), serviceSeconds: num('service') });

console.log(
  `autoscale: seed ${seed}, cold start ${coldStartSeconds} s, ${workers} workers per container, mean task ${num('service')} s (log-normal, cv 0.5), ` +
    `latency target ${target} s, keep-warm ${base.keepWarmSeconds} s, max ${base.maxContainers} containers${values['infer-arrivals'] ? ', arrivals inferred' : ''}\n`,
);
const header = [
  'trace',
  'policy',
  'tasks',
  'p50 wait s',
  'p95 wait s',
  `≤ ${target} s`,
  'container-s',
  'vs queue_depth',
  'scale events',
  'peak',
];
const rows: string[][] = [];
const best: string[] = [];
for (const trace of traces) {
  const results = policies.map((p) =>
    simulate(trace, p, { coldStartSeconds, workers, latencyTargetSeconds: target, reportArrivals: !values['infer-arrivals'] }),
  );
  const baseline = results[0].containerSeconds;
  for (const r of results) {
    rows.push([
      `${trace.name}`,
      r.policy,
      String(r.tasks),
      r.p50Wait.toFixed(1),
      r.p95Wait.toFixed(1),
      `${(r.withinTarget * 100).toFixed(1)} %`,
      String(Math.round(r.containerSeconds)),
      `${((r.containerSeconds / baseline) * 100).toFixed(0)} %`,
      String(r.scaleEvents),
      String(r.peakContainers),
    ]);
  }
  const cheapest = results.reduce((a, b) => (b.containerSeconds < a.containerSeconds ? b : a)).policy;
  const most = results.reduce((a, b) => (b.withinTarget > a.withinTarget ? b : a)).policy;
  best.push(
    `${trace.name.padEnd(9)} ${winner(results).padEnd(16)} (most within target: ${most}; cheapest: ${cheapest}; ${trace.description})`,
  );
}
console.log(table(header, rows));
console.log('\nbest per trace (most tasks within the target; within 1 point of it, fewest container-seconds):');
for (const line of best) console.log(`  ${line}`);

function winner(results: readonly SimulationResult[]): string {
  const top = Math.max(...results.map((r) => r.withinTarget));
  const near = results.filter((r) => r.withinTarget >= top - 0.01);
  return near.reduce((a, b) => (b.containerSeconds < a.containerSeconds ? b : a)).policy;
}

function table(head: string[], body: string[][]): string {
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((r) => r[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => (i < 2 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  return [line(head), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(line)].join('\n');
}
