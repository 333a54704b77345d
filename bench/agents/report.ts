/** bench/agents' figures: CPU and RSS per process from /proc, lag quantiles, the rows and the summary it prints. */
import { readFile } from 'node:fs/promises';

/**
 * CPU ticks (10 ms) and RSS per process group: the services, nats-server, the bench's Postgres
 * backends, the simulated fleet; `byPid` the ticks of each process, so a window counts only the
 * processes it saw at its end (a pooled Postgres connection closed meanwhile took its ticks with it).
 */
export type Usage = Record<string, { ticks: number; rssKiB: number; byPid: Record<number, number> }>;

export async function usage(groups: Record<string, number[]>): Promise<Usage> {
  const out: Usage = {};
  for (const [name, pids] of Object.entries(groups)) out[name] = await proc(pids);
  return out;
}

async function proc(pids: number[]): Promise<Usage[string]> {
  let ticks = 0;
  let rssKiB = 0;
  const byPid: Record<number, number> = {};
  for (const pid of pids) {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
    if (!stat) continue;
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    byPid[pid] = Number(fields[11] ?? 0) + Number(fields[12] ?? 0);
    ticks += byPid[pid];
    const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
    rssKiB += Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  }
  return { ticks, rssKiB, byPid };
}

/** The ticks a group spent between two samples: each process at the end less what it had at the start (all of it when it started since). */
export function ticksBetween(before: Usage[string] | undefined, after: Usage[string]): number {
  let ticks = 0;
  for (const [pid, t] of Object.entries(after.byPid)) ticks += t - (before?.byPid[Number(pid)] ?? 0);
  return ticks;
}

/** Nearest rank, so beats never applied (Infinity) count as such and never interpolate to NaN. */
function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.max(0, Math.ceil(q * s.length) - 1)]!;
}

/** Beats of the sample never seen applied are counted as lagging forever. */
export function padMissing(lags: number[], expected: number): number[] {
  const missing = Math.max(0, Math.round(expected) - lags.length);
  return [...lags, ...Array<number>(missing).fill(Infinity)];
}

export interface StepResult {
  agents: number;
  /** From the step's first join until every machine of the step was ready and the consumers held nothing. */
  joinSeconds: number;
  sentPerSecond: number;
  publishErrors: number;
  loadAverage: string;
  cpu: Record<string, number>;
  rssMiB: Record<string, number>;
  lag: Record<string, { p50: number; p99: number; n: number }>;
  p99: number;
}

export function summarise(
  step: Pick<StepResult, 'agents' | 'joinSeconds' | 'publishErrors' | 'loadAverage'> & { seconds: number; sent: number },
  before: Usage,
  after: Usage,
  lags: Record<string, number[]>,
): StepResult {
  const cpu: Record<string, number> = {};
  const rssMiB: Record<string, number> = {};
  for (const k of Object.keys(after)) {
    cpu[k] = ticksBetween(before[k], after[k]!) / step.seconds; // ticks of 10 ms per s = % of one core
    rssMiB[k] = after[k]!.rssKiB / 1024;
  }
  const lag: StepResult['lag'] = {};
  for (const [k, xs] of Object.entries(lags))
    lag[k] = xs.length ? { p50: quantile(xs, 0.5), p99: quantile(xs, 0.99), n: xs.length } : { p50: NaN, p99: Infinity, n: 0 };
  const { seconds, sent, ...rest } = step;
  return { ...rest, sentPerSecond: sent / seconds, cpu, rssMiB, lag, p99: Math.max(...Object.values(lag).map((l) => l.p99)) };
}

const ms = (x: number) => (Number.isFinite(x) ? `${Math.round(x)}` : '∞');

export function stepLine(r: StepResult): string {
  const procs = Object.keys(r.cpu)
    .map((k) => `${k} ${r.cpu[k]!.toFixed(0)}% ${r.rssMiB[k]!.toFixed(0)} MiB`)
    .join(', ');
  const lags = Object.entries(r.lag)
    .map(([k, l]) => `${k} p50 ${ms(l.p50)} / p99 ${ms(l.p99)} ms (n ${l.n})`)
    .join('; ');
  return `${r.agents} agents (joined in ${r.joinSeconds.toFixed(0)} s, load ${r.loadAverage}): ${r.sentPerSecond.toFixed(0)} msgs/s, ${r.publishErrors} publish errors; lag ${lags}; ${procs}`;
}

/** The table of steps, `sustained: N agents`, and the cost per 10,000 agents at the sustained step (and its growth). */
export function printSummary(results: StepResult[], maxLagMs: number) {
  const ok = results.filter((r) => r.p99 <= maxLagMs);
  const sustained = ok.at(-1);
  const names = Object.keys(results[0]?.cpu ?? {});
  // The control plane: everything but the bench's own simulated agents.
  const plane = names.filter((n) => n !== 'fleet');
  const total = (r: StepResult) => plane.reduce((sum, n) => sum + r.cpu[n]!, 0);
  console.log(
    `\n| agents | join s | load | msgs/s | sched p50/p99 ms | rep p50/p99 ms | ${names.map((n) => `${n} CPU% / RSS MiB`).join(' | ')} | control plane CPU% | per 10k agents |`,
  );
  console.log(`| ---: | ---: | ---: | ---: | ---: | ---: | ${names.map(() => '---:').join(' | ')} | ---: | ---: |`);
  for (const r of results)
    console.log(
      `| ${r.agents} | ${r.joinSeconds.toFixed(0)} | ${r.loadAverage} | ${r.sentPerSecond.toFixed(0)} | ${ms(r.lag.scheduler!.p50)} / ${ms(r.lag.scheduler!.p99)} | ${ms(r.lag.reputation!.p50)} / ${ms(r.lag.reputation!.p99)} | ${names.map((n) => `${r.cpu[n]!.toFixed(0)} / ${r.rssMiB[n]!.toFixed(0)}`).join(' | ')} | ${total(r).toFixed(0)} | ${((total(r) * 10_000) / r.agents).toFixed(0)} |`,
    );
  console.log(
    `\nsustained: ${sustained ? sustained.agents : `none (the first step, ${results[0]?.agents}, already lags)`} agents (each its own connection and user; p99 heartbeat lag ≤ ${maxLagMs} ms)`,
  );
  if (!sustained) return;
  const per = (x: number) => ((x * 10_000) / sustained.agents).toFixed(0);
  console.log(
    `cost per 10,000 agents at ${sustained.agents}: ${plane.map((n) => `${n} ${per(sustained.cpu[n]!)}%`).join(', ')}, control plane ${per(total(sustained))}% of a core (fleet ${per(sustained.cpu.fleet ?? 0)}%)`,
  );
  // Growth: CPU and memory per 10k agents, from the two largest sustained steps (the slope, not the fixed cost).
  if (ok.length < 2) return;
  const [a, b] = [ok.at(-2)!, ok.at(-1)!];
  const slope = 10_000 / (b.agents - a.agents);
  console.log(`growth per 10,000 agents (between ${a.agents} and ${b.agents}):`);
  for (const n of names)
    console.log(
      `  ${n}: +${((b.cpu[n]! - a.cpu[n]!) * slope).toFixed(0)}% of a core, +${((b.rssMiB[n]! - a.rssMiB[n]!) * slope).toFixed(0)} MiB`,
    );
}
