import { jest } from '@jest/globals';
import type { SandboxCreate } from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import { NerdctlRuntime, RuncRuntime } from '#tern/runtime';
import { agentContext } from '../../../../test/support/agent-context.js';
import { fakeInstanceOf, newTestService } from '../../../../test/support/test-service.js';
import { AGENT_CONTEXT } from '../agent-context.js';
import { CONTAINER_RUNTIME, ImagePulls, type RuntimeHandle } from '../containers/container-runtime.provider.js';
import { GpuHolders } from '../containers/gpu-holders.js';
import { h100 } from '../discovery/gpu/fixtures/inventory.js';
import { VolumeMounts } from '../volumes/volume-mounts.js';
import { SandboxesService } from './sandboxes.service.js';

const create = (over: Partial<SandboxCreate> = {}): SandboxCreate => ({
  sandboxId: 'sb-1',
  workspaceId: 'ws-1',
  image: 'host',
  env: {},
  workdir: '/workspace',
  resources: { cpuMillicores: 250, memoryBytes: 256 * 2 ** 20, gpuCount: 1 },
  network: { block: true },
  volumes: [],
  requestedAt: '2026-01-01T00:00:00.000Z',
  ...over,
});

/**
 * The service on a machine with one H100 and a fake runc runtime; GPUs are held in a real
 * GpuHolders (what containers allocate against too), and each served sandbox API is a
 * subscription on the fake NATS connection.
 */
async function sandboxes(handle?: RuntimeHandle) {
  const runtime = fakeInstanceOf(RuncRuntime);
  runtime.start.mockResolvedValue({ address: '10.88.0.5' } as never);
  const gpuHolders = new GpuHolders();
  const { sut, fake } = await newTestService(SandboxesService, [
    [
      CONTAINER_RUNTIME,
      handle ?? { runtime, isolation: { runtime: 'runc', network: 'private', userNamespaces: false }, pulls: new ImagePulls() },
    ],
    [AGENT_CONTEXT, agentContext({ gpus: [h100(0)] })],
    [GpuHolders, gpuHolders],
  ]);
  const unsubscribe = jest.fn();
  const subscribe = jest.fn(() => ({ unsubscribe }));
  Object.assign(fake(Messaging), { nc: { subscribe }, ns: { subject: (s: string) => s } });
  const volumes = fake(VolumeMounts);
  volumes.mount.mockResolvedValue({});
  volumes.release.mockResolvedValue({});
  return { sut, runtime, gpuHolders, volumes, subscribe, unsubscribe };
}

describe('SandboxesService.create', () => {
  it('starts the container and serves the sandbox API on its own subject, holding the GPUs it was given', async () => {
    const { sut, runtime, gpuHolders, subscribe } = await sandboxes();
    await expect(sut.create(create())).resolves.toEqual({ running: true });
    expect(runtime.start).toHaveBeenCalledWith(expect.objectContaining({ id: 'sb-1' }));
    expect(subscribe).toHaveBeenCalledWith(expect.stringMatching(/\.m-1\..*sb-1/), expect.anything());
    expect(sut.runningIds()).toEqual(['sb-1']);
    expect(gpuHolders.busy()).toEqual(new Set(['nvidia:0']));
  });

  it('refuses without a runtime, on a runtime other than runc, and an id the runtime cannot take', async () => {
    const none = await sandboxes({ problem: 'runc not found' });
    await expect(none.sut.create(create())).resolves.toEqual({
      running: false,
      reason: 'no container runtime on this machine: runc not found',
    });
    const nerdctl = fakeInstanceOf(NerdctlRuntime);
    Object.assign(nerdctl, { kind: 'nerdctl' });
    const other = await sandboxes({
      runtime: nerdctl,
      isolation: { runtime: 'nerdctl', network: 'host', userNamespaces: false },
      pulls: new ImagePulls(),
    });
    await expect(other.sut.create(create())).resolves.toEqual({
      running: false,
      reason: 'sandboxes need the runc runtime (this machine runs nerdctl)',
    });
    const { sut, runtime } = await sandboxes();
    await expect(sut.create(create({ sandboxId: '-rm' }))).resolves.toMatchObject({
      running: false,
      reason: expect.stringMatching(/letter or digit/),
    });
    expect(runtime.start).not.toHaveBeenCalled();
  });

  it('refuses a GPU another sandbox holds, and hands it out again once that one is removed', async () => {
    const { sut } = await sandboxes();
    await sut.create(create());
    await expect(sut.create(create({ sandboxId: 'sb-2' }))).resolves.toEqual({
      running: false,
      reason: 'needs 1 GPU(s); this machine has 1, 0 free',
    });
    await sut.remove({ sandboxId: 'sb-1', reason: 'done' } as never);
    await expect(sut.create(create({ sandboxId: 'sb-2' }))).resolves.toEqual({ running: true });
  });

  it('starts a sandbox once when the create is repeated while it starts', async () => {
    const { sut, runtime } = await sandboxes();
    const [first, second] = await Promise.all([sut.create(create()), sut.create(create())]);
    expect(first).toEqual({ running: true });
    expect(second).toEqual({ running: true });
    await expect(sut.create(create())).resolves.toEqual({ running: true });
    expect(runtime.start).toHaveBeenCalledTimes(1);
  });

  it('lets its GPUs and volumes go when the container does not start, and says why', async () => {
    const { sut, runtime, gpuHolders, volumes } = await sandboxes();
    runtime.start.mockRejectedValue(new Error('runc create: no such device'));
    await expect(sut.create(create())).resolves.toEqual({ running: false, reason: 'runc create: no such device' });
    expect(gpuHolders.busy().size).toBe(0);
    expect(volumes.release).toHaveBeenCalledWith('sb-1');
    expect(sut.runningIds()).toEqual([]);
  });

  it('does not start a sandbox whose volumes cannot be mounted', async () => {
    const { sut, runtime, gpuHolders, volumes } = await sandboxes();
    volumes.mount.mockRejectedValue(new Error('volume models not found'));
    await expect(sut.create(create({ volumes: [{ volume: 'models', mountPath: '/models', readOnly: true }] }))).resolves.toEqual({
      running: false,
      reason: 'its volumes could not be mounted: volume models not found',
    });
    expect(runtime.start).not.toHaveBeenCalled();
    expect(gpuHolders.busy().size).toBe(0);
  });
});

describe('SandboxesService, once a sandbox runs', () => {
  it('removes it after a start still under way, and stops serving it', async () => {
    const { sut, runtime, unsubscribe } = await sandboxes();
    const starting = sut.create(create());
    const removed = sut.remove({ sandboxId: 'sb-1', reason: 'deleted' } as never);
    await expect(removed).resolves.toEqual({ removed: true });
    await starting;
    expect(runtime.remove).toHaveBeenCalledWith('sb-1');
    expect(unsubscribe).toHaveBeenCalled();
    expect(sut.runningIds()).toEqual([]);
  });

  it('refuses a snapshot or a tunnel for a sandbox that does not run here', async () => {
    const { sut } = await sandboxes();
    await expect(sut.snapshot({ sandboxId: 'sb-9' } as never)).resolves.toEqual({ reason: 'sandbox sb-9 does not run on this machine' });
    await expect(sut.openTunnel({ sandboxId: 'sb-9' } as never)).resolves.toEqual({
      opened: false,
      reason: 'sandbox sb-9 does not run on this machine',
    });
  });

  it('tells a sandbox of this machine from anything else the runtime lists', async () => {
    const { sut, runtime } = await sandboxes();
    await sut.create(create());
    const labels = runtime.start.mock.calls[0][0].labels!;
    expect(sut.isSandbox({ id: 'sb-1', labels })).toBe(true);
    expect(sut.isSandbox({ id: 'sb-1', labels: { ...labels, 'tern.machine': 'm-2' } })).toBe(false);
    expect(sut.isSandbox({ id: 'c-1', labels: {} })).toBe(false);
  });
});
