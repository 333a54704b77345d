import { useState } from 'react';
import { download, get, type RewardsReport, type UsageReport, type UsageRow } from '../api.js';
import { BarChart, Card, Figure, Loaded, round, Table } from '../components.js';
import { usePoll } from '../poll.js';

const PERIODS = { '24h': 24, '7d': 24 * 7, '30d': 24 * 30 } as const;
type Period = keyof typeof PERIODS;
const GROUPS = ['workspace', 'deployment', 'machine', 'gpu'] as const;

function window(period: Period) {
  const to = new Date(Math.ceil(Date.now() / 3600_000) * 3600_000);
  return { from: new Date(to.getTime() - PERIODS[period] * 3600_000).toISOString(), to: to.toISOString() };
}

/** Rows per period → one stacked series per group. */
function bySeries(rows: UsageRow[], metric: keyof Pick<UsageRow, 'gpuSeconds' | 'cpuCoreSeconds' | 'containerSeconds'>) {
  const labels = [...new Set(rows.map((r) => r.periodStart))].sort();
  const groups = [...new Set(rows.map((r) => r.name ?? r.group))];
  return {
    labels: labels.map((l) => new Date(l).toLocaleString([], { month: 'short', day: 'numeric', hour: '2-digit' })),
    series: groups.map((g) => ({
      label: g,
      values: labels.map((l) => rows.filter((r) => (r.name ?? r.group) === g && r.periodStart === l).reduce((n, r) => n + r[metric], 0)),
    })),
  };
}

export function UsagePage({ operator }: { operator: boolean }) {
  const [groupBy, setGroupBy] = useState<(typeof GROUPS)[number]>('deployment');
  const [period, setPeriod] = useState<Period>('24h');
  const [metric, setMetric] = useState<'gpuSeconds' | 'cpuCoreSeconds' | 'containerSeconds'>('cpuCoreSeconds');
  const [error, setError] = useState<string>();
  const { from, to } = window(period);
  const granularity = period === '24h' ? 'hour' : 'day';
  const params = new URLSearchParams({ group_by: groupBy, from, to });
  const query = `${params.toString()}&granularity=${granularity}`;
  const usage = usePoll((signal) => get<UsageReport>(`/api/v1/usage?${query}`, signal), [query]);
  const totals = usePoll((signal) => get<UsageReport>(`/api/v1/usage?${params.toString()}`, signal), [params.toString()]);
  const rewards = usePoll(
    (signal) =>
      operator
        ? get<RewardsReport>(`/api/v1/usage/rewards?from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`, signal)
        : Promise.resolve(null),
    [operator, from, to],
  );
  const csv = () => {
    download(`/api/v1/usage?${params.toString()}&format=csv`, `tern-usage-${groupBy}-${period}.csv`).catch((e: unknown) =>
      setError(String(e)),
    );
  };
  return (
    <>
      <h1>Usage and rewards</h1>
      <div className="filters">
        <label>
          By
          <select name="group_by" value={groupBy} onChange={(e) => setGroupBy(e.target.value as (typeof GROUPS)[number])}>
            {GROUPS.filter((g) => operator || g !== 'machine').map((g) => (
              <option key={g}>{g}</option>
            ))}
          </select>
        </label>
        <label>
          Period
          <select name="period" value={period} onChange={(e) => setPeriod(e.target.value as Period)}>
            {Object.keys(PERIODS).map((p) => (
              <option key={p}>{p}</option>
            ))}
          </select>
        </label>
        <label>
          Chart
          <select name="metric" value={metric} onChange={(e) => setMetric(e.target.value as typeof metric)}>
            <option value="cpuCoreSeconds">CPU core-seconds</option>
            <option value="gpuSeconds">GPU-seconds</option>
            <option value="containerSeconds">container-seconds</option>
          </select>
        </label>
        <button onClick={csv} data-testid="csv">
          Download CSV
        </button>
        {error && <span className="error">{error}</span>}
      </div>
      <div className="grid">
        <Card title="Totals" testId="usage-totals">
          <Loaded polled={totals}>
            {(report) => (
              <>
                <div className="figures">
                  <Figure label="GPU-seconds" value={round(report.totals.gpuSeconds)} testId="total-gpu-seconds" />
                  <Figure label="CPU core-seconds" value={round(report.totals.cpuCoreSeconds)} testId="total-cpu-seconds" />
                  <Figure label="container-seconds" value={round(report.totals.containerSeconds)} testId="total-container-seconds" />
                  <Figure label="tasks completed" value={report.totals.tasksCompleted} testId="total-tasks-completed" />
                  <Figure label="tasks failed" value={report.totals.tasksFailed} />
                </div>
                <Table
                  testId="usage-rows"
                  rows={report.rows}
                  rowKey={(r) => r.group}
                  columns={[
                    { title: groupBy, cell: (r) => r.name ?? r.group },
                    { title: 'GPU-s', cell: (r) => round(r.gpuSeconds) },
                    { title: 'CPU core-s', cell: (r) => round(r.cpuCoreSeconds) },
                    { title: 'memory GiB-s', cell: (r) => round(r.memoryGibSeconds) },
                    { title: 'container-s', cell: (r) => round(r.containerSeconds) },
                    { title: 'tasks', cell: (r) => r.tasksCompleted },
                  ]}
                />
              </>
            )}
          </Loaded>
        </Card>
        <Card title={`Over time, by ${groupBy}`} testId="usage-chart">
          <Loaded polled={usage}>{(report) => <BarChart stacked {...bySeries(report.rows, metric)} />}</Loaded>
        </Card>
        {operator && (
          <Card title="Rewards (reputation-weighted GPU-seconds)" testId="rewards">
            <Loaded polled={rewards}>
              {(report) =>
                report && (
                  <Table
                    rows={report.machines}
                    rowKey={(m) => m.machineId}
                    columns={[
                      { title: 'machine', cell: (m) => m.machineId },
                      { title: 'GPU-s', cell: (m) => round(m.gpuSeconds) },
                      { title: 'score', cell: (m) => round(m.score, 3) },
                      { title: 'share', cell: (m) => `${round(m.share * 100, 2)} %` },
                    ]}
                  />
                )
              }
            </Loaded>
          </Card>
        )}
      </div>
    </>
  );
}
