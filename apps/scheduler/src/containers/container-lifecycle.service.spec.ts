import { TERN_CONFIG } from '#tern/config';
import { ContainersRepository, CrashLoopsRepository } from '#tern/persistence';
import { crashResetMs } from '#tern/placement';
import { newTestService } from '../../../../test/support/test-service.js';
import { ContainerLifecycleService } from './container-lifecycle.service.js';
import type { LifecycleEvent } from './container-progress.js';

const BACKOFF = { firstMs: 1000, maxMs: 60_000 };
const at = '2026-01-01T00:00:00.000Z';
const ids = { containerId: 'c1', machineId: 'm1', deploymentId: 'd1', deploymentVersion: 2, at };
const failed = (phase: string) =>
  ({ kind: 'failed', event: { ...ids, phase, error: 'exit 1', exitCode: 1, lastLines: ['Traceback'] } }) as unknown as LifecycleEvent;
const started = {
  kind: 'started',
  event: { ...ids, resources: { cpuMillicores: 1000, memoryBytes: 1 << 30, gpuCount: 0 } },
} as unknown as LifecycleEvent;

async function lifecycle() {
  const { sut, fake } = await newTestService(ContainerLifecycleService, [[TERN_CONFIG, { containers: { crashBackoff: BACKOFF } }]]);
  const containers = fake(ContainersRepository);
  containers.applyProgress.mockResolvedValue(true);
  return { sut, containers, crashLoops: fake(CrashLoopsRepository) };
}

describe('ContainerLifecycleService.record', () => {
  it("updates the container's row, or inserts it from the first event the scheduler hears of it", async () => {
    const { sut, containers } = await lifecycle();
    expect(await sut.record(started)).toBe('updated');
    containers.applyProgress.mockResolvedValue(false);
    containers.insertFromEvent.mockResolvedValue(true);
    expect(await sut.record(started)).toBe('inserted');
    expect(containers.insertFromEvent).toHaveBeenCalledWith('c1', 'm1', expect.anything(), 'd1', 2);
  });

  it('takes a row another replica inserted meanwhile as updated, and an unknown version as such', async () => {
    const { sut, containers } = await lifecycle();
    containers.applyProgress.mockResolvedValueOnce(false).mockResolvedValueOnce(true);
    containers.insertFromEvent.mockResolvedValue(false);
    expect(await sut.record(started)).toBe('updated');
    containers.applyProgress.mockResolvedValue(false);
    expect(await sut.record(started)).toBe('unknown-deployment-version');
  });

  it("counts a failure of the version's code towards its crash loop, with the reset of its back-off", async () => {
    const { sut, crashLoops } = await lifecycle();
    await sut.record(failed('running'));
    expect(crashLoops.recordCrash).toHaveBeenCalledWith(
      'c1',
      at,
      { phase: 'running', error: 'exit 1', exitCode: 1, lastLines: ['Traceback'] },
      crashResetMs(BACKOFF) / 1000,
    );
  });

  it("never counts a machine's loss, nor a failure of a container of an unknown version", async () => {
    const { sut, containers, crashLoops } = await lifecycle();
    await sut.record(failed('machine-lost'));
    containers.applyProgress.mockResolvedValue(false);
    containers.insertFromEvent.mockResolvedValue(false);
    expect(await sut.record(failed('running'))).toBe('unknown-deployment-version');
    expect(crashLoops.recordCrash).not.toHaveBeenCalled();
  });
});
