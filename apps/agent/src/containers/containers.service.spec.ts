import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ContainerStart } from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import { ContainerStartError, type ExitResult, type ManagedContainer, RuncRuntime } from '#tern/runtime';
import { agentContext } from '../../../../test/support/agent-context.js';
import { waitFor } from '../../../../test/support/processes.js';
import { fakeInstanceOf, newTestService } from '../../../../test/support/test-service.js';
import { AGENT_CONTEXT } from '../agent-context.js';
import { h100 } from '../discovery/gpu/fixtures/inventory.js';
import { InvokeRoutes } from '../invoke/invoke-routes.js';
import { TaskDispatcher } from '../tasks/task-dispatcher.js';
import { VolumeMounts } from '../volumes/volume-mounts.js';
import { containerStart } from './fixtures/container-start.js';
import { CONTAINER_RUNTIME, ImagePulls, type RuntimeHandle } from './container-runtime.provider.js';
import { toContainerSpec } from './container-spec.js';
import { ContainersService } from './containers.service.js';
import { GpuHolders } from './gpu-holders.js';

/** A start whose container needs nothing mounted (no code bundle, no volumes) and one GPU of any kind. */
const start = (over: Partial<ContainerStart> = {}): ContainerStart =>
  containerStart({ volumes: [], resources: { cpuMillicores: 500, memoryBytes: 256 * 2 ** 20, gpuCount: 1 }, ...over });

const exited = (exitCode: number | null, extra: Partial<ExitResult> = {}): ExitResult => ({
  exitCode,
  oomKilled: false,
  finishedAt: new Date().toISOString(),
  ...extra,
});

/** A container's health endpoint on loopback, answering `status`. */
let health: Server;
let healthStatus = 200;
beforeAll(async () => {
  health = createServer((_req, res) => res.writeHead(healthStatus).end()).listen(0, '127.0.0.1');
  await once(health, 'listening');
});
afterAll(() => health.close());
beforeEach(() => (healthStatus = 200));
const healthPort = () => (health.address() as AddressInfo).port;

/**
 * The service on a machine with one H100 and a fake runc runtime whose containers run until
 * `exit` ends one or the runtime stops it (SIGTERM); each writes one stderr line.
 */
async function containers(handle?: RuntimeHandle) {
  const runtime = fakeInstanceOf(RuncRuntime);
  const exits = new Map<string, (exit: ExitResult) => void>();
  runtime.wait.mockImplementation((id) => new Promise((resolve) => exits.set(id, resolve)));
  runtime.stop.mockImplementation(async (id) => {
    const exit = exited(null, { signal: 'SIGTERM' });
    exits.get(id)?.(exit);
    return exit;
  });
  runtime.logs.mockImplementation(async function* (containerId) {
    yield { containerId, stream: 'stderr' as const, line: 'Traceback: boom', time: new Date() };
  });
  runtime.start.mockImplementation(async (spec) => ({ id: spec.id, port: healthPort() }) as never);
  const pulls = new ImagePulls();
  const runc: RuntimeHandle = { runtime, isolation: { runtime: 'runc', network: 'host', userNamespaces: false }, pulls };
  const ctx = agentContext({ gpus: [h100(0)] });
  const { sut, fake } = await newTestService(ContainersService, [
    [CONTAINER_RUNTIME, handle ?? runc],
    [AGENT_CONTEXT, ctx],
    [GpuHolders, new GpuHolders()],
  ]);
  const messaging = fake(Messaging);
  const tasks = fake(TaskDispatcher);
  tasks.drop.mockResolvedValue(undefined);
  fake(VolumeMounts).release.mockResolvedValue({});
  /** The container events published, as `<container>:<event>`. */
  const events = () => messaging.publish.mock.calls.map(([, , opts]) => opts?.msgId);
  const payload = (msgId: string) => messaging.publish.mock.calls.find(([, , opts]) => opts?.msgId === msgId)?.[1];
  const until = (msgId: string) => waitFor(msgId, async () => events().includes(msgId), 5000, 10);
  const exit = (id: string, result: ExitResult) => exits.get(id)!(result);
  return { sut, ctx, runtime, pulls, messaging, invokes: fake(InvokeRoutes), tasks, events, payload, until, exit };
}

describe('ContainersService.start', () => {
  it('announces starting, then started, and serves invokes once its health check passes, before it says ready', async () => {
    const { sut, ctx, messaging, invokes, tasks, events, until } = await containers();
    expect(sut.start(start())).toEqual({ accepted: true });
    expect(sut.busyGpus()).toEqual(new Set(['nvidia:0']));
    await until('c-1:ready');
    expect(events()).toEqual(['c-1:starting', 'c-1:started', 'c-1:ready']);
    expect(invokes.serve).toHaveBeenCalledWith('c-1', { host: '127.0.0.1', port: healthPort() }, 8);
    const readyCall = messaging.publish.mock.invocationCallOrder[2];
    expect(invokes.serve.mock.invocationCallOrder[0]).toBeLessThan(readyCall);
    expect(tasks.serve).not.toHaveBeenCalled();
    expect(ctx.state.containerRows()).toMatchObject([{ id: 'c-1', state: 'ready', deployment: 'dep-1:v3' }]);
  });

  it("shows the pull of its own image in its log, not another's", async () => {
    const { sut, ctx, runtime, pulls, until } = await containers();
    // Its image's progress, and another start's at the same time.
    runtime.image.mockImplementation(async (ref) => {
      pulls.emit('progress', ref, 'layer 1/2 pulled');
      pulls.emit('progress', 'other:image', 'layer of another image');
      return undefined as never;
    });
    sut.start(start({ image: 'python:3.12-slim' }));
    await until('c-1:ready');
    expect(ctx.state.containerLog('c-1')).toEqual(['[tern] image: layer 1/2 pulled', '! Traceback: boom']);
  });

  it("has a task queue's ready container pull tasks too", async () => {
    const { sut, tasks, until } = await containers();
    sut.start(start({ deploymentKind: 'task_queue' }));
    await until('c-1:ready');
    expect(tasks.serve).toHaveBeenCalledWith(expect.objectContaining({ containerId: 'c-1' }), { host: '127.0.0.1', port: healthPort() });
  });

  it('refuses a start without a runtime, with an id the runtime cannot take, or for GPUs the machine has not free', async () => {
    const none = await containers({ problem: 'runc not found' });
    expect(none.sut.start(start())).toEqual({ accepted: false, reason: 'no container runtime on this machine: runc not found' });
    const { sut, runtime } = await containers();
    expect(sut.start(start({ containerId: '.hidden' }))).toMatchObject({
      accepted: false,
      reason: expect.stringMatching(/letter or digit/),
    });
    expect(sut.start(start({ resources: { cpuMillicores: 500, memoryBytes: 2 ** 28, gpuCount: 2 } }))).toEqual({
      accepted: false,
      reason: 'needs 2 GPU(s); this machine has 1, 1 free',
    });
    sut.start(start());
    expect(sut.start(start({ containerId: 'c-2' }))).toEqual({ accepted: false, reason: 'needs 1 GPU(s); this machine has 1, 0 free' });
    expect(runtime.start).toHaveBeenCalledTimes(0);
    expect(sut.runningIds()).toEqual(['c-1']);
  });

  it('accepts a repeated start without starting the container twice', async () => {
    const { sut, runtime, until } = await containers();
    sut.start(start());
    expect(sut.start(start())).toEqual({ accepted: true, reason: 'already known to this agent' });
    await until('c-1:ready');
    expect(runtime.start).toHaveBeenCalledTimes(1);
  });

  it('reports a start that fails as failed in the phase it failed, and frees its GPUs', async () => {
    const { sut, ctx, runtime, events, payload, until } = await containers();
    runtime.start.mockRejectedValue(new ContainerStartError('c-1', 'exec format error', ''));
    sut.start(start());
    await until('c-1:failed');
    expect(events()).toEqual(['c-1:starting', 'c-1:failed']);
    expect(payload('c-1:failed')).toMatchObject({ phase: 'start', error: expect.stringMatching(/exec format error/) });
    expect(sut.runningIds()).toEqual([]);
    expect(sut.busyGpus().size).toBe(0);
    expect(ctx.state.containerRows()).toMatchObject([{ id: 'c-1', state: 'failed' }]);
  });

  it('fails a container that is not ready in time, with the last probe in its own log, and stops it', async () => {
    healthStatus = 503;
    const { sut, ctx, runtime, events, payload, until } = await containers();
    sut.start(start({ startupTimeoutSeconds: 1 }));
    await until('c-1:stopped');
    expect(events()).toEqual(['c-1:starting', 'c-1:started', 'c-1:failed', 'c-1:stopped']);
    expect(payload('c-1:failed')).toMatchObject({ phase: 'health', error: expect.stringMatching(/^not ready within 1 s: .*answered 503/) });
    expect(payload('c-1:stopped')).toMatchObject({ reason: 'failed its health check' });
    expect(runtime.stop).toHaveBeenCalledWith('c-1', 5000);
    expect(ctx.state.containerLog('c-1')).toContainEqual(expect.stringMatching(/^! \[tern\] not ready within 1 s/));
  });
});

describe('ContainersService, once a container runs', () => {
  it('reports a crash as failed, with its exit code and last lines, then stopped, and removes it', async () => {
    const { sut, ctx, runtime, events, payload, until, exit } = await containers();
    sut.start(start());
    await until('c-1:ready');
    exit('c-1', exited(3));
    await until('c-1:stopped');
    expect(events()).toEqual(['c-1:starting', 'c-1:started', 'c-1:ready', 'c-1:failed', 'c-1:stopped']);
    expect(payload('c-1:failed')).toMatchObject({
      phase: 'runtime',
      error: 'exited with code 3',
      exitCode: 3,
      lastLines: ['! Traceback: boom'],
    });
    expect(payload('c-1:stopped')).toMatchObject({ exitCode: 3, reason: 'exited' });
    await waitFor('its removal', async () => runtime.remove.mock.calls.length > 0, 5000, 10);
    expect(runtime.remove).toHaveBeenCalledWith('c-1');
    expect(sut.runningIds()).toEqual([]);
    expect(ctx.state.containerRows()).toMatchObject([{ id: 'c-1', state: 'failed', exitCode: 3 }]);
  });

  it('names a kill for memory as oom', async () => {
    const { sut, payload, until, exit } = await containers();
    sut.start(start());
    await until('c-1:ready');
    exit('c-1', exited(null, { oomKilled: true, signal: 'SIGKILL' }));
    await until('c-1:stopped');
    expect(payload('c-1:failed')).toMatchObject({ phase: 'runtime', error: 'killed for using more memory than it was given' });
    expect(payload('c-1:failed')).not.toHaveProperty('exitCode');
    expect(payload('c-1:stopped')).toMatchObject({ oomKilled: true, reason: 'oom', signal: 'SIGKILL' });
  });

  it('stops it on command with its grace, after it stops taking work, and reports no failure', async () => {
    const { sut, runtime, invokes, events, payload, until } = await containers();
    sut.start(start());
    await until('c-1:ready');
    expect(sut.stop({ containerId: 'c-1', reason: 'scaled down', graceSeconds: 30 } as never)).toEqual({ accepted: true });
    await until('c-1:stopped');
    expect(runtime.stop).toHaveBeenCalledWith('c-1', 30_000);
    expect(invokes.drop.mock.invocationCallOrder[0]).toBeLessThan(runtime.stop.mock.invocationCallOrder[0]);
    expect(events()).not.toContain('c-1:failed');
    expect(payload('c-1:stopped')).toMatchObject({ reason: 'stop command: scaled down' });
  });

  it('takes a stop for a container it does not have as done', async () => {
    const { sut, runtime } = await containers();
    expect(sut.stop({ containerId: 'c-9', reason: 'scaled down', graceSeconds: 30 } as never)).toEqual({
      accepted: true,
      reason: 'no such container on this machine (already gone)',
    });
    expect(runtime.stop).not.toHaveBeenCalled();
  });

  it('stops every container when the agent exits, unless the runner keeps them for its next session', async () => {
    const kept = await containers();
    kept.sut.start(start());
    await kept.until('c-1:ready');
    kept.ctx.keepContainers = true;
    await kept.sut.beforeApplicationShutdown();
    expect(kept.runtime.stop).not.toHaveBeenCalled();

    const { sut, ctx, payload, until } = await containers();
    sut.start(start());
    await until('c-1:ready');
    ctx.keepContainers = false;
    await sut.beforeApplicationShutdown();
    expect(payload('c-1:stopped')).toMatchObject({ reason: 'agent shutting down' });
  });
});

describe('ContainersService.reconcile', () => {
  const found = (id: string, labels: Record<string, string>, status: ManagedContainer['status'], exit?: ExitResult): ManagedContainer => ({
    id,
    runtime: 'runc',
    image: { ref: 'host', digest: 'sha256:x' },
    labels,
    startedAt: '2026-01-01T00:00:00Z',
    status,
    ...(exit ? { exit } : {}),
  });
  const labelsOf = (containerId: string, machineId = 'm-1') =>
    toContainerSpec(start({ containerId, resources: { cpuMillicores: 500, memoryBytes: 2 ** 28, gpuCount: 0 } }), machineId, []).labels!;

  it("adopts this machine's containers, kills the rest, and reports one that ended while no agent watched", async () => {
    const { sut, runtime, events, payload, until } = await containers();
    const running = found('c-1', labelsOf('c-1'), 'running');
    runtime.list.mockResolvedValue([
      running,
      found('c-2', labelsOf('c-2', 'm-2'), 'running'),
      found('stray', {}, 'running'),
      found('c-3', labelsOf('c-3'), 'stopped', exited(0)),
    ]);
    runtime.adopt.mockResolvedValue(running);
    await sut.reconcile();
    expect(runtime.adopt).toHaveBeenCalledWith('c-1');
    expect(runtime.stop.mock.calls.map(([id]) => id)).toEqual(['c-2', 'stray']);
    expect(sut.runningIds()).toEqual(['c-1', 'c-3']);
    await until('c-3:stopped');
    expect(payload('c-3:stopped')).toMatchObject({ exitCode: 0, reason: 'exited while the agent was not running' });
    expect(events()).toEqual(['c-3:stopped']);
    expect(sut.runningIds()).toEqual(['c-1']);
  });
});
