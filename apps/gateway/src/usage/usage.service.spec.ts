import { UsageRepository } from '#tern/persistence';
import { newTestService } from '../../../../test/support/test-service.js';
import { UsageService } from './usage.service.js';

const window = { from: new Date('2026-01-01T00:00:00Z'), to: new Date('2026-01-02T00:00:00Z') };
const row = (gpuSeconds: number, tasksCompleted: number) => ({
  group: 'w1',
  gpuSeconds,
  cpuCoreSeconds: 10,
  memoryGibSeconds: 1,
  containerSeconds: 20,
  tasksCompleted,
  tasksFailed: 0,
  taskSeconds: 5,
});

async function usage() {
  const { sut, fake } = await newTestService(UsageService);
  return { sut, repo: fake(UsageRepository) };
}

describe('UsageService', () => {
  it('totals every measure over the rows of the report it asked for', async () => {
    const { sut, repo } = await usage();
    repo.report.mockResolvedValue([row(100, 2), row(50, 3)] as never);
    const report = await sut.usage(window, 'workspace', 'day', 'w1');
    expect(repo.report).toHaveBeenCalledWith({ ...window, groupBy: 'workspace', bucket: 'day', workspaceId: 'w1' });
    expect(report).toMatchObject({
      from: '2026-01-01T00:00:00.000Z',
      to: '2026-01-02T00:00:00.000Z',
      groupBy: 'workspace',
      granularity: 'day',
    });
    expect(report.totals).toEqual({
      gpuSeconds: 150,
      cpuCoreSeconds: 20,
      memoryGibSeconds: 2,
      containerSeconds: 40,
      tasksCompleted: 5,
      tasksFailed: 0,
      taskSeconds: 10,
    });
  });

  it('splits a reward by GPU-seconds weighted by score, a machine without a score counting as neutral', async () => {
    const { sut, repo } = await usage();
    repo.gpuSecondsByMachine.mockResolvedValue([
      { machineId: 'm-1', gpuSeconds: 300, score: 1 },
      { machineId: 'm-2', gpuSeconds: 100, score: null },
    ] as never);
    const report = await sut.rewards(window, 100);
    expect(report.totalGpuSeconds).toBe(400);
    expect(report.formula).toMatch(/share\(m\) = weight\(m\) \/ Σ weight/);
    const [first, second] = report.machines;
    expect(first).toMatchObject({ machineId: 'm-1', score: 1 });
    expect(second).toMatchObject({ machineId: 'm-2', score: report.neutralScore });
    expect(first.reward! + second.reward!).toBeCloseTo(100);
    expect(first.reward! / second.reward!).toBeCloseTo(300 / (100 * report.neutralScore));
  });
});
