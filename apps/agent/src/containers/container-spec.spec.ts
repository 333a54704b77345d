import { type GpuInventory, gpuTypeMatches } from '#tern/contracts';
import { allocateGpus, recordFromLabels, recordFromStart, runnerArgs, toContainerSpec } from './container-spec.js';
import { h100 } from '../discovery/gpu/fixtures/inventory.js';
import { containerStart } from './fixtures/container-start.js';

const start = containerStart();

const a100 = (index: number): GpuInventory => ({
  index,
  vendor: 'nvidia',
  model: 'NVIDIA A100-SXM4-80GB',
  memoryMiB: 81920,
  driverVersion: '550',
});

describe('container specs', () => {
  it('maps a start command onto the runtime: command and args, env, limits, workspace volumes, GPUs, labels', () => {
    const spec = toContainerSpec(start, 'm-1', [h100(2)]);
    expect(spec).toEqual({
      id: 'c-1',
      image: 'host',
      args: ['python3', '/app/main.py', '--fast'],
      env: {
        GREETING: 'hello',
        TERN_DEPLOYMENT_ID: 'dep-1',
        TERN_DEPLOYMENT_KIND: 'endpoint',
        TERN_DEPLOYMENT_VERSION: '3',
        TERN_MACHINE_ID: 'm-1',
        TERN_WORKSPACE_ID: 'ws-1',
        TERN_WORKERS: '2',
        TERN_CONCURRENCY: '4',
        TERN_GPU_COUNT: '1',
      },
      memoryBytes: 256 * 2 ** 20,
      cpuMillicores: 500,
      pidsLimit: 1024,
      volumes: [{ name: 'ws-1/models', containerPath: '/models', readOnly: true }],
      gpus: { devices: [{ index: 2, uuid: 'GPU-2' }] },
      network: 'private',
      egress: {},
      labels: expect.objectContaining({
        'tern.container': 'c-1',
        'tern.machine': 'm-1',
        'tern.gpus': 'nvidia:2',
        'tern.deployment-version': '3',
      }),
    });
  });

  it('leaves args to the image when the command names a handler only', () => {
    const spec = toContainerSpec({ ...start, command: undefined, args: undefined, handler: 'app.py:predict' }, 'm-1', []);
    expect(spec.args).toBeUndefined();
    expect(spec.env?.TERN_HANDLER).toBe('app.py:predict');
    expect(spec.gpus).toBeUndefined();
  });

  it('runs a handler in the runner for its language, with the code at /app and the runners and the Python SDK bound read-only', () => {
    const handlerStart = { ...start, command: undefined, args: undefined, handler: 'app.py:predict', onStart: 'app.py:load' };
    const mounts = { codeDir: '/state/code/abc', runnersDir: '/opt/tern/runners', pythonSdkDir: '/opt/tern/sdk/python' };
    const spec = toContainerSpec(handlerStart, 'm-1', [], mounts);
    expect(spec.args).toEqual(['python3', '/tern/runners/python/tern_runner.py']);
    expect(spec.env).toMatchObject({
      TERN_HANDLER: 'app.py:predict',
      TERN_ON_START: 'app.py:load',
      TERN_WORKERS: '2',
      TERN_CONCURRENCY: '4',
    });
    expect(spec.cwd).toBe('/app');
    expect(spec.binds).toEqual([
      { hostPath: '/state/code/abc', containerPath: '/app' },
      { hostPath: '/opt/tern/runners', containerPath: '/tern/runners' },
      { hostPath: '/opt/tern/sdk/python', containerPath: '/tern/sdk/python' },
    ]);
    // A Node handler has no use for the Python SDK.
    const node = toContainerSpec({ ...handlerStart, handler: 'app.mjs:predict', onStart: undefined }, 'm-1', [], mounts);
    expect(node.binds?.map((b) => b.containerPath)).toEqual(['/app', '/tern/runners']);
    expect(runnerArgs('src/app.mjs:predict')).toEqual(['node', '/tern/runners/node/tern-runner.mjs']);
    expect(runnerArgs('app.js:handlers.predict')).toEqual(['node', '/tern/runners/node/tern-runner.mjs']);
    expect(runnerArgs('pkg.app:predict')).toEqual(['python3', '/tern/runners/python/tern_runner.py']);
  });

  it("gives a private network the deployment's egress policy; host networking has none", () => {
    expect(toContainerSpec({ ...start, network: { block: true } }, 'm-1', []).egress).toEqual({ block: true });
    expect(toContainerSpec({ ...start, network: { allow: ['203.0.113.0/24'] } }, 'm-1', []).egress).toEqual({ allow: ['203.0.113.0/24'] });
    const host = toContainerSpec({ ...start, network: { block: true } }, 'm-1', [], {}, 'host');
    expect(host).toMatchObject({ network: 'host' });
    expect(host.egress).toBeUndefined();
  });

  it('recognises its own containers from their labels, and nothing else', () => {
    const labels = toContainerSpec(start, 'm-1', [h100(0)]).labels!;
    expect(recordFromLabels('c-1', labels, 'm-1')).toEqual(recordFromStart(start, [h100(0)]));
    expect(recordFromLabels('c-1', labels, 'm-2')).toBeUndefined();
    expect(recordFromLabels('other', labels, 'm-1')).toBeUndefined();
    expect(recordFromLabels('c-1', {}, 'm-1')).toBeUndefined();
    // A command server's own readiness check survives an agent restart with the container.
    const tcp = { ...start, healthCheck: 'tcp' };
    expect(recordFromLabels('c-1', toContainerSpec(tcp, 'm-1', []).labels!, 'm-1')).toMatchObject({ healthCheck: 'tcp' });
    // So does where its load is read, so an adopted container's load still reaches the autoscaler.
    const loaded = { ...start, loadProbe: { path: '/metrics', metric: 'vllm:num_requests_waiting' } };
    const adopted = recordFromLabels('c-1', toContainerSpec(loaded, 'm-1', []).labels!, 'm-1');
    expect(adopted).toEqual(recordFromStart(loaded, []));
    expect(adopted?.loadProbe).toEqual({ path: '/metrics', metric: 'vllm:num_requests_waiting' });
  });

  it('runs a command server in /app, its folder, when a code bundle comes with it', () => {
    expect(toContainerSpec(start, 'm-1', [], { codeDir: '/state/code/abc' })).toMatchObject({
      cwd: '/app',
      binds: [{ hostPath: '/state/code/abc', containerPath: '/app' }],
    });
  });
});

describe('GPU allocation', () => {
  it('matches GPU types by whole words, like the scheduler', () => {
    expect(gpuTypeMatches('NVIDIA H100 80GB HBM3', 'H100')).toBe(true);
    expect(gpuTypeMatches('NVIDIA A100-SXM4-80GB', 'A10')).toBe(false);
    expect(gpuTypeMatches('NVIDIA GeForce RTX 4090', 'rtx 4090')).toBe(true);
  });

  it('picks free GPUs of the asked type, lowest index first, or says why not', () => {
    const gpus = [h100(0), h100(1), a100(2)];
    expect(allocateGpus(gpus, new Set(['nvidia:0']), 1, 'H100')).toEqual({ ok: true, gpus: [h100(1)] });
    expect(allocateGpus(gpus, new Set(), 2)).toEqual({ ok: true, gpus: [h100(0), h100(1)] });
    expect(allocateGpus(gpus, new Set(), 0)).toEqual({ ok: true, gpus: [] });
    expect(allocateGpus(gpus, new Set(['nvidia:0', 'nvidia:1']), 1, 'H100')).toEqual({
      ok: false,
      reason: 'needs 1 H100 GPU(s); this machine has 2, 0 free',
    });
    expect(allocateGpus([], new Set(), 1)).toEqual({ ok: false, reason: 'needs 1 GPU(s); this machine has 0, 0 free' });
  });
});
