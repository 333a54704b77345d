import { buildOciConfig } from '../oci/config-builder.js';
import { cdiEdits, loadCdiSpecs } from './cdi.js';
import { fakeHost } from './fake-host.js';
import { GpuInjector } from './gpu-edits.js';

const NVIDIA_YAML = `---
cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
- name: GPU-aaa
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
- name: "1"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia1
      major: 195
      minor: 1
containerEdits:
  env:
  - NVIDIA_VISIBLE_DEVICES=void
  deviceNodes:
  - path: /dev/nvidiactl
  hooks:
  - hookName: createContainer
    path: /usr/bin/nvidia-ctk
    args: [nvidia-ctk, hook, update-ldcache, --folder, /usr/lib/x86_64-linux-gnu]
  mounts:
  - hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15
    containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15
    options: [ro, nosuid, nodev, bind]
`;

const machine = fakeHost({
  devices: {
    '/dev/nvidia0': { major: 195, minor: 0, type: 'c' },
    '/dev/nvidiactl': { major: 195, minor: 255, type: 'c' },
  },
  files: {
    '/etc/cdi/nvidia.yaml': NVIDIA_YAML,
    '/etc/cdi/broken.json': '{ not json',
    '/etc/cdi/README': 'ignored',
  },
});

const input = {
  id: 'gpu-2',
  rootfs: '/r',
  args: ['x'],
  env: [],
  cwd: '/',
  user: { uid: 65534, gid: 65534 },
  tmpBytes: 1,
  shmBytes: 1,
  network: 'host' as const,
  imageMounts: [],
  volumes: [],
  cgroupsPath: '/tern/gpu-2',
  annotations: {},
  limitSwap: false,
};

describe('CDI', () => {
  it('loads specs from the CDI directories and skips broken files', async () => {
    const errors: string[] = [];
    const specs = await loadCdiSpecs(['/etc/cdi', '/var/run/cdi'], machine, (f) => errors.push(f));
    expect(specs.map((s) => s.kind)).toEqual(['nvidia.com/gpu']);
    expect(errors).toEqual(['/etc/cdi/broken.json']);
  });

  it('applies the common and per-device edits, finding devices by UUID then index', async () => {
    const [spec] = await loadCdiSpecs(['/etc/cdi'], machine);
    const edits = await cdiEdits(spec!, { devices: [{ index: 0, uuid: 'GPU-aaa' }, { index: 1 }] }, machine);
    const c = buildOciConfig({ ...input, edits });
    expect(c.linux.devices).toEqual([
      { path: '/dev/nvidiactl', type: 'c', major: 195, minor: 255, fileMode: 0o666, uid: 0, gid: 0 },
      { path: '/dev/nvidia0', type: 'c', major: 195, minor: 0, fileMode: 0o666, uid: 0, gid: 0 },
      { path: '/dev/nvidia1', type: 'c', major: 195, minor: 1, fileMode: 0o666, uid: 0, gid: 0 },
    ]);
    expect(c.mounts.at(-1)).toEqual({
      destination: '/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15',
      source: '/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15',
      type: 'bind',
      options: ['ro', 'nosuid', 'nodev', 'bind'],
    });
    expect(c.hooks?.createContainer?.[0]?.path).toBe('/usr/bin/nvidia-ctk');
    // Tern's env comes after the spec's, so the assignment wins over "void".
    expect(c.process.env).toEqual(expect.arrayContaining(['NVIDIA_VISIBLE_DEVICES=0,1', 'CUDA_VISIBLE_DEVICES=0,1']));
  });

  it('refuses a device the spec does not list', async () => {
    const [spec] = await loadCdiSpecs(['/etc/cdi'], machine);
    await expect(cdiEdits(spec!, { devices: [{ index: 5 }] }, machine)).rejects.toThrow(/no device 5/);
  });

  it('is preferred by GpuInjector over device discovery', async () => {
    const injector = new GpuInjector({ io: machine, cdiDirs: ['/etc/cdi'] });
    const edits = await injector.edits({ devices: [{ index: 0 }] }, true);
    expect(edits.hooks?.createContainer).toHaveLength(1);
  });
});
