import { containersToStop } from './scale-down.js';
import { isResolvedSpec, placementRequest, routeCapacity, startCommand } from './start-command.js';
import type { ResolvedSpec } from '#tern/contracts';

const spec: ResolvedSpec = {
  name: 'llm',
  kind: 'endpoint',
  image: 'ghcr.io/acme/llm:1',
  handler: 'app.py:predict',
  onStart: 'app.py:load',
  code: `sha256:${'b'.repeat(64)}`,
  cpuMillicores: 2000,
  memoryBytes: 4 * 2 ** 30,
  gpuTypes: ['H100', 'A100'],
  gpuCount: 1,
  workers: 2,
  concurrentRequests: 4,
  keepWarmSeconds: 180,
  timeoutSeconds: 180,
  autoscaler: { type: 'queue_depth', minContainers: 0, maxContainers: 3, tasksPerContainer: 8 },
  env: { A: '1' },
  volumes: [{ name: 'weights', mountPath: '/weights', readOnly: true }],
  pool: 'gpu',
  minReputation: 0.8,
};

describe('scale-down choice', () => {
  const active = [
    { id: 'c1', ready: true },
    { id: 'c2', ready: false },
    { id: 'c3', ready: true },
  ];

  it('stops not-ready containers first, then idle ones, never busy ones', () => {
    expect(containersToStop(active, 2, [], false)).toEqual(['c2']);
    expect(containersToStop(active, 1, ['c3'], false)).toEqual(['c2', 'c3']);
    expect(containersToStop(active, 0, ['c3'], false)).toEqual(['c2', 'c3']);
    expect(containersToStop(active, 0, ['c1', 'c3'], false)).toEqual(['c2', 'c1', 'c3']);
  });

  it('stops nothing at or below desired, everything when the deployment is stopped', () => {
    expect(containersToStop(active, 3, ['c1'], false)).toEqual([]);
    expect(containersToStop(active, 5, [], false)).toEqual([]);
    expect(containersToStop(active, 3, [], true)).toEqual(['c1', 'c2', 'c3']);
  });
});

describe('start command', () => {
  const target = {
    containerId: 'c-1',
    deploymentId: 'd-1',
    deploymentVersion: 2,
    workspaceId: 'w-1',
    kind: 'endpoint' as const,
    gpuType: 'H100',
  };

  it('carries the spec, code bundle and on_start hook included', () => {
    expect(startCommand(spec, target, new Date('2026-01-01T00:00:00Z'))).toEqual({
      containerId: 'c-1',
      deploymentId: 'd-1',
      deploymentVersion: 2,
      workspaceId: 'w-1',
      deploymentKind: 'endpoint',
      image: 'ghcr.io/acme/llm:1',
      handler: 'app.py:predict',
      onStart: 'app.py:load',
      code: `sha256:${'b'.repeat(64)}`,
      env: { A: '1' },
      resources: { cpuMillicores: 2000, memoryBytes: 4 * 2 ** 30, gpuCount: 1, gpuType: 'H100' },
      volumes: [{ volume: 'weights', mountPath: '/weights', readOnly: true }],
      ports: [],
      workers: 2,
      concurrency: 4,
      startupTimeoutSeconds: 120,
      requestedAt: '2026-01-01T00:00:00.000Z',
    });
  });

  it('passes a command instead of a handler, and no GPU type without GPUs', () => {
    const cmd = startCommand(
      { ...spec, handler: undefined, onStart: undefined, code: undefined, command: ['serve'], gpuCount: 0, gpuTypes: [] },
      target,
      new Date(0),
    );
    expect(cmd).toMatchObject({ command: ['serve'], env: { A: '1' }, resources: { gpuCount: 0 } });
    expect(cmd).not.toHaveProperty('handler');
    expect(cmd).not.toHaveProperty('code');
    expect(cmd.resources).not.toHaveProperty('gpuType');
  });

  it('asks placement for what the spec asks', () => {
    expect(placementRequest(spec)).toEqual({
      cpuMillicores: 2000,
      memoryBytes: 4 * 2 ** 30,
      gpuTypes: ['H100', 'A100'],
      gpuCount: 1,
      pool: 'gpu',
      minReputation: 0.8,
      image: 'ghcr.io/acme/llm:1',
    });
    expect(placementRequest({ ...spec, minReputation: undefined })).not.toHaveProperty('minReputation');
    expect(placementRequest({ ...spec, image: 'host' })).not.toHaveProperty('image');
  });

  it('recognises a resolved spec and sizes routes', () => {
    expect(isResolvedSpec(spec)).toBe(true);
    expect(isResolvedSpec({})).toBe(false);
    expect(isResolvedSpec(null)).toBe(false);
    expect(routeCapacity(spec)).toBe(8);
  });
});
