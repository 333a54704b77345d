import { Command } from 'commander';
import type { RewardsReport, UsageReport } from '#tern/contracts';
import { ApiClient } from '../api-client.js';
import { resolveContext } from '../cli-config.js';
import { table } from '../table.js';

/** 12.3 with up to one decimal below 100, whole numbers above; the API has the exact figures (--json). */
function amount(n: number): string {
  return n >= 100 ? Math.round(n).toLocaleString('en-US') : (Math.round(n * 10) / 10).toString();
}

function query(params: Record<string, string | undefined>): string {
  const q = new URLSearchParams(Object.entries(params).filter((e): e is [string, string] => e[1] !== undefined)).toString();
  return q ? `?${q}` : '';
}

export function renderUsage(report: UsageReport): string {
  const head = `Usage ${report.from} → ${report.to}, by ${report.groupBy}${report.granularity ? ` per ${report.granularity}` : ''}`;
  if (!report.rows.length) return `${head}\nNo usage in this window.`;
  const withPeriod = report.granularity !== null;
  const rows = report.rows.map((r) => [
    ...(withPeriod ? [r.periodStart.replace(':00.000Z', 'Z')] : []),
    r.name ? `${r.name} (${r.group})` : r.group,
    amount(r.gpuSeconds),
    amount(r.cpuCoreSeconds),
    amount(r.memoryGibSeconds),
    amount(r.containerSeconds),
    `${r.tasksCompleted}/${r.tasksFailed}`,
    amount(r.taskSeconds),
  ]);
  const t = report.totals;
  rows.push([
    ...(withPeriod ? ['total'] : []),
    withPeriod ? '' : 'total',
    amount(t.gpuSeconds),
    amount(t.cpuCoreSeconds),
    amount(t.memoryGibSeconds),
    amount(t.containerSeconds),
    `${t.tasksCompleted}/${t.tasksFailed}`,
    amount(t.taskSeconds),
  ]);
  const headers = [
    ...(withPeriod ? ['PERIOD'] : []),
    report.groupBy.toUpperCase(),
    'GPU-S',
    'CPU-CORE-S',
    'MEM-GIB-S',
    'CONTAINER-S',
    'TASKS OK/FAILED',
    'TASK-S',
  ];
  return `${head}\n${table(headers, rows)}`;
}

export function renderRewards(report: RewardsReport): string {
  const head = `Rewards ${report.from} → ${report.to}: ${report.formula} (no score counts as ${report.neutralScore})`;
  if (!report.machines.length) return `${head}\nNo machine served anything in this window.`;
  const withReward = report.machines.some((m) => m.reward !== undefined);
  const rows = report.machines.map((m) => [
    m.machineId,
    amount(m.gpuSeconds),
    m.score.toFixed(3),
    `${(m.share * 100).toFixed(2)}%`,
    ...(withReward ? [(m.reward ?? 0).toFixed(2)] : []),
  ]);
  return `${head}\n${table(['MACHINE', 'GPU-S', 'SCORE', 'SHARE', ...(withReward ? ['REWARD'] : [])], rows)}`;
}

export function usageCommand(): Command {
  const usage = new Command('usage')
    .description(
      'What workloads used: GPU-, CPU-core- and memory-GiB-seconds and task counts (your workspace; every workspace, or by machine, for the operator)',
    )
    .option('--group-by <group>', 'workspace, deployment, machine or gpu', 'workspace')
    .option('--from <date>', 'start of the window, ISO 8601 (default: 24 h before --to)')
    .option('--to <date>', 'end of the window, ISO 8601 (default: now)')
    .option('--granularity <unit>', 'one row per hour or day (default: one row per group for the whole window)')
    .option('--workspace <id>', "only this workspace's usage (another workspace needs the operator token)")
    .option('--csv', 'print CSV')
    .option('--json', 'print the raw JSON')
    .action(
      async (opts: {
        groupBy: string;
        from?: string;
        to?: string;
        granularity?: string;
        workspace?: string;
        csv?: boolean;
        json?: boolean;
      }) => {
        const path = `/api/v1/usage${query({ group_by: opts.groupBy, from: opts.from, to: opts.to, granularity: opts.granularity, workspace: opts.workspace, ...(opts.csv ? { format: 'csv' } : {}) })}`;
        const { body } = await new ApiClient(resolveContext()).get<UsageReport | string>(path);
        if (opts.csv) process.stdout.write(String(body));
        else console.log(opts.json ? JSON.stringify(body, null, 2) : renderUsage(body as UsageReport));
      },
    );

  usage
    .command('rewards')
    .description("Each machine's share of the GPU-seconds it served, weighted by its reputation (operator token)")
    .option('--from <date>', 'start of the period, ISO 8601 (default: 24 h before --to)')
    .option('--to <date>', 'end of the period, ISO 8601 (default: now)')
    .option('--amount <n>', 'an amount to distribute by share')
    .option('--csv', 'print CSV')
    .option('--json', 'print the raw JSON')
    .action(async (opts: { from?: string; to?: string; amount?: string; csv?: boolean; json?: boolean }) => {
      const path = `/api/v1/usage/rewards${query({ from: opts.from, to: opts.to, amount: opts.amount, ...(opts.csv ? { format: 'csv' } : {}) })}`;
      const { body } = await new ApiClient(resolveContext()).get<RewardsReport | string>(path);
      if (opts.csv) process.stdout.write(String(body));
      else console.log(opts.json ? JSON.stringify(body, null, 2) : renderRewards(body as RewardsReport));
    });

  return usage;
}
