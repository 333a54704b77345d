import { renderRewards, renderUsage } from './usage.js';

const row = (group: string, over: Record<string, unknown> = {}) => ({
  group,
  name: null,
  periodStart: '2026-01-01T10:00:00.000Z',
  periodEnd: '2026-01-01T11:00:00.000Z',
  gpuSeconds: 3600,
  cpuCoreSeconds: 1234.56,
  memoryGibSeconds: 0.25,
  containerSeconds: 3600,
  tasksCompleted: 4,
  tasksFailed: 2,
  taskSeconds: 9.87,
  ...over,
});

describe('tern usage views', () => {
  it('a table per group with a total line; names shown beside ids', () => {
    const text = renderUsage({
      from: '2026-01-01T00:00:00.000Z',
      to: '2026-01-02T00:00:00.000Z',
      groupBy: 'deployment',
      granularity: null,
      workspace: null,
      rows: [row('d-1', { name: 'hello' }), row('d-2')],
      totals: {
        gpuSeconds: 7200,
        cpuCoreSeconds: 2469.12,
        memoryGibSeconds: 0.5,
        containerSeconds: 7200,
        tasksCompleted: 8,
        tasksFailed: 4,
        taskSeconds: 19.74,
      },
    });
    const lines = text.split('\n');
    expect(lines[0]).toBe('Usage 2026-01-01T00:00:00.000Z → 2026-01-02T00:00:00.000Z, by deployment');
    expect(lines[1]).toMatch(/^DEPLOYMENT\s+GPU-S\s+CPU-CORE-S\s+MEM-GIB-S\s+CONTAINER-S\s+TASKS OK\/FAILED\s+TASK-S$/);
    expect(lines[2]).toMatch(/^hello \(d-1\)\s+3,600\s+1,235\s+0.3\s+3,600\s+4\/2\s+9.9$/);
    expect(lines[4]).toMatch(/^total\s+7,200\s+2,469\s+0.5\s+7,200\s+8\/4\s+19.7$/);
  });

  it('a period column with a granularity; an empty window says so', () => {
    const base = { from: 'a', to: 'b', groupBy: 'machine' as const, workspace: null, totals: row('x') };
    expect(renderUsage({ ...base, granularity: 'hour', rows: [row('m-1')] }).split('\n')[2]).toMatch(/^2026-01-01T10:00Z\s+m-1\s/);
    expect(renderUsage({ ...base, granularity: null, rows: [] })).toContain('No usage in this window.');
  });

  it('rewards as shares, with the amount column only when an amount was given', () => {
    const report = { from: 'a', to: 'b', formula: 'f', neutralScore: 1, totalGpuSeconds: 10 };
    const plain = renderRewards({ ...report, machines: [{ machineId: 'm-1', gpuSeconds: 10, score: 0.5, weight: 5, share: 1 }] });
    expect(plain).toMatch(/MACHINE\s+GPU-S\s+SCORE\s+SHARE$/m);
    expect(plain).toMatch(/^m-1\s+10\s+0.500\s+100.00%$/m);
    const paid = renderRewards({
      ...report,
      machines: [{ machineId: 'm-1', gpuSeconds: 10, score: 0.5, weight: 5, share: 1, reward: 42 }],
    });
    expect(paid).toMatch(/^m-1\s+10\s+0.500\s+100.00%\s+42.00$/m);
  });
});
