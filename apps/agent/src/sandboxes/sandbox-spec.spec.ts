import type { SandboxCreate } from '#tern/contracts';
import { sandboxFromLabels } from './sandbox-labels.js';
import { toSandboxSpec } from './sandbox-spec.js';
import { h100 } from '../discovery/gpu/fixtures/inventory.js';

const create: SandboxCreate = {
  sandboxId: 'sb-1',
  workspaceId: 'ws-1',
  image: 'host',
  env: { GREETING: 'hello' },
  workdir: '/workspace',
  resources: { cpuMillicores: 250, memoryBytes: 256 * 2 ** 20, gpuCount: 2, gpuType: 'H100' },
  network: { block: true },
  volumes: [{ volume: 'models', mountPath: '/models', readOnly: true }],
  requestedAt: '2025-01-01T00:00:00.000Z',
};

const record = { sandboxId: 'sb-1', workspaceId: 'ws-1', workdir: '/workspace', gpus: ['nvidia:1', 'nvidia:3'] };

describe('sandbox container specs', () => {
  it("hands the sandbox's GPUs to its container as a deployment's container gets them, and labels them", () => {
    const gpus = [h100(1), h100(3)];
    const spec = toSandboxSpec(create, record, 'm-1', gpus, { volumes: { models: '/state/volumes/ws-1/models' } }, 'private');
    expect(spec.gpus).toEqual({
      devices: [
        { index: 1, uuid: 'GPU-1' },
        { index: 3, uuid: 'GPU-3' },
      ],
    });
    expect(spec.env).toMatchObject({ TERN_GPU_COUNT: '2', TERN_SANDBOX_ID: 'sb-1', GREETING: 'hello' });
    expect(sandboxFromLabels('sb-1', spec.labels!, 'm-1')).toEqual(record);
  });

  it("gives a sandbox without GPUs none, its /workspace and volumes, and the create's egress", () => {
    const spec = toSandboxSpec(
      { ...create, resources: { ...create.resources, gpuCount: 0 } },
      { ...record, gpus: [] },
      'm-1',
      [],
      { workspace: '/state/volumes/sandboxes/sb-1', volumes: { models: '/state/volumes/ws-1/models' } },
      'private',
    );
    expect(spec.gpus).toBeUndefined();
    expect(spec.env).not.toHaveProperty('TERN_GPU_COUNT');
    expect(spec).toMatchObject({
      args: ['sleep', 'infinity'],
      cwd: '/workspace',
      egress: { block: true },
      volumes: [
        { name: 'sandboxes/sb-1', containerPath: '/workspace', hostPath: '/state/volumes/sandboxes/sb-1' },
        { name: 'ws-1/models', containerPath: '/models', readOnly: true, hostPath: '/state/volumes/ws-1/models' },
      ],
    });
    expect(toSandboxSpec(create, record, 'm-1', [], { volumes: {} }, 'host')).not.toHaveProperty('egress');
  });
});
