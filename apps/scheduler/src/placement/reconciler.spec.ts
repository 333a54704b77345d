import 'reflect-metadata';
import { TERN_CONFIG } from '#tern/config';
import { type DeploymentSpec, resolveSpec } from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import { ContainersRepository, type VersionToReconcile } from '#tern/persistence';
import { newTestService } from '../../../../test/support/test-service.js';
import { AgentCommands } from '../machines/agent-commands.js';
import { Placer } from './placer.js';
import { Reconciler } from './reconciler.js';

const version = (): VersionToReconcile => ({
  id: 'v1',
  deploymentId: 'd1',
  version: 1,
  spec: resolveSpec({ name: 'hello', kind: 'endpoint', handler: 'app.py:predict', code: `sha256:${'a'.repeat(64)}` } as DeploymentSpec),
  desiredContainers: 1,
  idleContainers: [],
  placementReason: null,
  workspaceId: 'w1',
  kind: 'endpoint',
  deploymentState: 'active',
});

async function reconciler() {
  const { sut, fake } = await newTestService(Reconciler, [[TERN_CONFIG, { containers: { startLimitSeconds: 300 } }]]);
  const containers = fake(ContainersRepository);
  containers.failOnOfflineMachines.mockResolvedValue([]);
  containers.failStartsPastLimit.mockResolvedValue([]);
  containers.versionsToReconcile.mockResolvedValue([version()]);
  containers.activeOf.mockResolvedValue([]);
  containers.withVersionLock.mockImplementation(async (_id, work) => (await work(), true));
  fake(Messaging).publish.mockResolvedValue(undefined as never);
  return { sut, containers, placer: fake(Placer), agents: fake(AgentCommands) };
}

async function until(done: () => boolean) {
  for (let i = 0; i < 100 && !done(); i++) await new Promise((r) => setTimeout(r, 10));
  expect(done()).toBe(true);
}

describe('Reconciler back-off', () => {
  it('a version that found no room waits out its back-off, and tries again at once when a container ends', async () => {
    const { sut, placer, containers } = await reconciler();
    placer.reserveMany.mockResolvedValue({ placed: [], unplaced: 'no machine has 1 CPU free' });

    await sut.pass();
    await sut.pass();
    expect(placer.reserveMany).toHaveBeenCalledTimes(1); // the second pass sat out the back-off
    expect(containers.setPlacementReason).toHaveBeenCalledWith('v1', 'no machine has 1 CPU free');

    sut.roomFreed(); // wakes the loop: a pass runs now
    await until(() => placer.reserveMany.mock.calls.length === 2);
  });

  it('a version whose start was refused keeps its back-off when a container ends, and loses it when a machine becomes ready', async () => {
    const { sut, placer, agents, containers } = await reconciler();
    placer.reserveMany.mockResolvedValue({
      placed: [{ containerId: 'c1', machineId: 'm1', gpuType: null }],
      unplaced: undefined,
    } as never);
    agents.start.mockResolvedValue({ accepted: false, reason: 'image pull denied' });

    await sut.pass();
    expect(containers.markStartFailed).toHaveBeenCalledWith('c1', 'machine m1 refused the start: image pull denied', undefined);
    sut.roomFreed();
    await sut.pass();
    expect(placer.reserveMany).toHaveBeenCalledTimes(1);

    sut.resetBackoff();
    await sut.pass();
    expect(placer.reserveMany).toHaveBeenCalledTimes(2);
  });
});
