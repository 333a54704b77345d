import 'reflect-metadata';
import { register } from 'prom-client';
import { TERN_CONFIG } from '#tern/config';
import type { TaskSpotCheckRecord } from '#tern/contracts';
import { TasksRepository } from '#tern/persistence';
import { newTestService } from '../../../../test/support/test-service.js';
import { SpotCheckExpiry } from './spot-check-expiry.js';

const requestedAt = '2026-01-01T00:00:00.000Z';
const at = (seconds: number) => new Date(Date.parse(requestedAt) + seconds * 1000);
const pending = (over: Partial<TaskSpotCheckRecord> = {}): TaskSpotCheckRecord => ({
  state: 'pending',
  machineId: 'm-checked',
  attempt: 1,
  resultSha256: `sha256:${'a'.repeat(64)}`,
  verifierMachineId: 'm-verifier',
  verifierContainerId: 'c-verifier',
  requestedAt,
  ...over,
});

async function expiredCount(): Promise<number> {
  const metric = await register.getSingleMetric('tern_spot_checks_total')?.get();
  return metric?.values.find((v) => v.labels.outcome === 'expired')?.value ?? 0;
}

async function sweeper(rows: { taskId: string; timeoutSeconds: number; spotCheck: TaskSpotCheckRecord }[]) {
  const { sut, fake } = await newTestService(SpotCheckExpiry, [[TERN_CONFIG, { tasks: { spotCheckMarginSeconds: 120 } }]]);
  const tasks = fake(TasksRepository);
  tasks.pendingSpotChecks.mockResolvedValue(rows);
  tasks.settleSpotCheck.mockImplementation(async (taskId, _v, change) => ({
    workspaceId: 'w-1',
    deploymentId: 'd-1',
    spotCheck: { ...rows.find((r) => r.taskId === taskId)!.spotCheck, ...change },
  }));
  return { sut, tasks };
}

describe('SpotCheckExpiry', () => {
  it("expires a check pending past its task's timeout plus the margin, from its own verifier's key", async () => {
    const { sut, tasks } = await sweeper([{ taskId: 't-1', timeoutSeconds: 60, spotCheck: pending() }]);
    const before = await expiredCount();
    expect(await sut.run(at(181))).toBe(1);
    expect(tasks.settleSpotCheck).toHaveBeenCalledWith(
      't-1',
      { machineId: 'm-verifier', containerId: 'c-verifier' },
      { state: 'expired', reason: expect.stringMatching(/m-verifier did not answer within 180 s/), checkedAt: at(181).toISOString() },
    );
    expect(await expiredCount()).toBe(before + 1);
  });

  it('leaves a check still within its wait, whatever the others around it', async () => {
    const { sut, tasks } = await sweeper([
      { taskId: 't-long', timeoutSeconds: 3600, spotCheck: pending() },
      { taskId: 't-short', timeoutSeconds: 10, spotCheck: pending() },
    ]);
    expect(await sut.run(at(600))).toBe(1);
    expect(tasks.settleSpotCheck).toHaveBeenCalledTimes(1);
    expect(tasks.settleSpotCheck.mock.calls[0]![0]).toBe('t-short');
  });

  it('counts nothing when the answer or another replica settled the check first', async () => {
    const { sut, tasks } = await sweeper([{ taskId: 't-1', timeoutSeconds: 60, spotCheck: pending() }]);
    tasks.settleSpotCheck.mockResolvedValue(undefined);
    const before = await expiredCount();
    expect(await sut.run(at(10_000))).toBe(0);
    expect(await expiredCount()).toBe(before);
  });
});
