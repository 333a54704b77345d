import 'reflect-metadata';
import { TERN_CONFIG } from '#tern/config';
import { type DeploymentSpec, resolveSpec } from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import { ContainersRepository, type VersionToReconcile } from '#tern/persistence';
import { newTestService } from '../../../../test/support/test-service.js';
import { AgentCommands } from '../machines/agent-commands.js';
import { Placer } from './placer.js';
import { Reconciler } from './reconciler.js';
import { RoomGrowth } from './room-growth.js';

const version = (crash: Partial<VersionToReconcile> = {}): VersionToReconcile => ({
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
  latest: true,
  crashes: 0,
  lastCrashAt: null,
  ...crash,
});

async function reconciler(v = version()) {
  const { sut, fake } = await newTestService(Reconciler, [
    [TERN_CONFIG, { containers: { startLimitSeconds: 300, crashBackoff: { firstMs: 1000, maxMs: 300_000 } } }],
  ]);
  const containers = fake(ContainersRepository);
  containers.failOnOfflineMachines.mockResolvedValue([]);
  containers.failStartsPastLimit.mockResolvedValue([]);
  containers.versionsToReconcile.mockResolvedValue([v]);
  containers.activeOf.mockResolvedValue([]);
  containers.withVersionLock.mockImplementation(async (_id, work) => (await work(), true));
  fake(Messaging).publish.mockResolvedValue(undefined as never);
  const room = fake(RoomGrowth);
  room.poolsGrown.mockResolvedValue(new Set());
  return { sut, containers, room, placer: fake(Placer), agents: fake(AgentCommands) };
}

async function until(done: () => boolean) {
  for (let i = 0; i < 100 && !done(); i++) await new Promise((r) => setTimeout(r, 10));
  expect(done()).toBe(true);
}

describe('Reconciler back-off', () => {
  it('a version that found no room waits out its back-off while no room grows in its pool', async () => {
    const { sut, placer, containers, room } = await reconciler();
    placer.reserveMany.mockResolvedValue({ placed: [], unplaced: 'no machine has 1 CPU free' });

    await sut.pass();
    await sut.pass();
    await sut.pass();
    expect(placer.reserveMany).toHaveBeenCalledTimes(1); // the later passes sat out the back-off
    expect(containers.setPlacementReason).toHaveBeenCalledWith('v1', 'no machine has 1 CPU free');
    // Each pass asked about the pool the version waits in, and only that one.
    expect(room.poolsGrown).toHaveBeenLastCalledWith(new Set(['default']));

    room.poolsGrown.mockResolvedValue(new Set(['gpu'])); // room elsewhere does not help
    await sut.pass();
    expect(placer.reserveMany).toHaveBeenCalledTimes(1);
  });

  it('a version that found no room tries again on the next pass once room grows in its pool, and backs off further if still short', async () => {
    const { sut, placer, room } = await reconciler();
    placer.reserveMany.mockResolvedValue({ placed: [], unplaced: 'no machine has 1 CPU free' });
    await sut.pass();
    room.poolsGrown.mockResolvedValueOnce(new Set(['default']));
    await sut.pass();
    expect(placer.reserveMany).toHaveBeenCalledTimes(2);
    // Still short: the back-off goes on from its failures (2 s now), it does not start over.
    await sut.pass();
    expect(placer.reserveMany).toHaveBeenCalledTimes(2);
  });

  it('a version no longer to reconcile stops waiting for room, and its pool is no longer looked at', async () => {
    const { sut, placer, room, containers } = await reconciler();
    placer.reserveMany.mockResolvedValue({ placed: [], unplaced: 'no machine has 1 CPU free' });
    await sut.pass();
    await sut.pass();
    expect(room.poolsGrown).toHaveBeenLastCalledWith(new Set(['default']));
    containers.versionsToReconcile.mockResolvedValue([]); // its deployment was deleted
    await sut.pass();
    expect(room.poolsGrown).toHaveBeenLastCalledWith(new Set());
  });

  it('a failed look at the room leaves the back-off to run its course, and the pass goes on', async () => {
    const { sut, placer, room, containers } = await reconciler();
    placer.reserveMany.mockResolvedValue({ placed: [], unplaced: 'no machine has 1 CPU free' });
    await sut.pass();
    room.poolsGrown.mockRejectedValue(new Error('connection reset'));
    await sut.pass();
    expect(placer.reserveMany).toHaveBeenCalledTimes(1);
    expect(containers.failStartsPastLimit).toHaveBeenCalledTimes(2);
  });

  it('a container ending wakes a pass at once, and a burst of them at most one more per 200 ms', async () => {
    const { sut, placer, room } = await reconciler();
    placer.reserveMany.mockResolvedValue({ placed: [], unplaced: 'no machine has 1 CPU free' });
    await sut.pass();
    expect(room.poolsGrown).toHaveBeenCalledTimes(1);

    room.poolsGrown.mockResolvedValue(new Set(['default']));
    sut.roomFreed(); // wakes the loop: a pass runs now
    await until(() => placer.reserveMany.mock.calls.length === 2);
    // Twenty ends in a row: one more pass at the end of the 200 ms (Throttle's spec times it), not twenty.
    for (let i = 0; i < 20; i++) sut.roomFreed();
    await until(() => room.poolsGrown.mock.calls.length === 3);
    await new Promise((r) => setTimeout(r, 400));
    // At most one more: the loop's own 1 s tick may land in this window on a loaded machine.
    expect(room.poolsGrown.mock.calls.length).toBeGreaterThanOrEqual(3);
    expect(room.poolsGrown.mock.calls.length).toBeLessThanOrEqual(4);
    await sut.onModuleDestroy();
  });

  it('a version whose start was refused keeps its back-off when room grows, and loses it when a machine becomes ready', async () => {
    const { sut, placer, agents, containers, room } = await reconciler();
    placer.reserveMany.mockResolvedValue({
      placed: [{ containerId: 'c1', machineId: 'm1', gpuType: null }],
      unplaced: undefined,
    } as never);
    agents.start.mockResolvedValue({ accepted: false, reason: 'image pull denied' });

    await sut.pass();
    expect(containers.markStartFailed).toHaveBeenCalledWith('c1', 'machine m1 refused the start: image pull denied', undefined);
    room.poolsGrown.mockResolvedValue(new Set(['default']));
    await sut.pass();
    expect(placer.reserveMany).toHaveBeenCalledTimes(1);

    sut.resetBackoff();
    await sut.pass();
    expect(placer.reserveMany).toHaveBeenCalledTimes(2);
  });
});

describe('Reconciler: crash loops', () => {
  it('starts no container of a version before its crash back-off is over, and says so', async () => {
    const lastCrashAt = new Date(Date.now() - 1000);
    // 9 crashes: 256 s, far longer than any slow test takes to get here.
    const { sut, placer, containers } = await reconciler(version({ crashes: 9, lastCrashAt }));
    await sut.pass();
    expect(placer.reserveMany).not.toHaveBeenCalled();
    expect(containers.setPlacementReason).toHaveBeenCalledWith(
      'v1',
      `CrashLoopBackOff: 9 container(s) crashed in a row; next start at ${new Date(lastCrashAt.getTime() + 256_000).toISOString()}`,
    );
  });

  it('once the wait is over, starts one container at a time while the version loops', async () => {
    const { sut, placer } = await reconciler(version({ desiredContainers: 3, crashes: 1, lastCrashAt: new Date(Date.now() - 1500) }));
    placer.reserveMany.mockResolvedValue({ placed: [] });
    await sut.pass();
    expect(placer.reserveMany).toHaveBeenCalledWith('v1', expect.anything(), 1, 'scale-up');
  });

  it("stops a superseded version's containers at once while it loops, whatever it desires", async () => {
    const { sut, containers, agents } = await reconciler(version({ latest: false, crashes: 2, lastCrashAt: new Date() }));
    containers.activeOf.mockResolvedValue([{ id: 'c1', readyAt: null }]);
    containers.markStopping.mockResolvedValue({ machineId: 'm1' } as never);
    agents.stop.mockResolvedValue({ accepted: true });
    await sut.pass();
    expect(containers.markStopping).toHaveBeenCalledWith('c1', 'superseded while crash-looping', expect.anything());
  });
});
