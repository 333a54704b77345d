import { buildOciConfig } from '../oci/config-builder.js';
import { splitDev } from './device-io.js';
import { fakeHost } from './fake-host.js';
import { GpuInjector } from './gpu-edits.js';
import { discoverNvidia, gpuEnv, NVIDIA_LIB_DIR, nvidiaEdits, parseLdconfig } from './nvidia.js';

const LDCONFIG = `812 libs found in cache \`/etc/ld.so.cache'
	libnvidia-ml.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1
	libnvidia-ml.so.1 (libc6) => /usr/lib/i386-linux-gnu/libnvidia-ml.so.1
	libcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1
	libcuda.so (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so
	libnvidia-ptxjitcompiler.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.1
	libcudart.so.12 (libc6,x86-64) => /usr/local/cuda/lib64/libcudart.so.12
	libc.so.6 (libc6,x86-64, OS ABI: Linux 3.2.0) => /lib/x86_64-linux-gnu/libc.so.6
`;

const machine = fakeHost({
  devices: {
    '/dev/nvidia0': { major: 195, minor: 0, type: 'c' },
    '/dev/nvidia1': { major: 195, minor: 1, type: 'c' },
    '/dev/nvidiactl': { major: 195, minor: 255, type: 'c' },
    '/dev/nvidia-uvm': { major: 508, minor: 0, type: 'c' },
    '/dev/nvidia-uvm-tools': { major: 508, minor: 1, type: 'c' },
  },
  files: { '/usr/bin/nvidia-smi': '' },
  ldconfig: LDCONFIG,
});

const baseInput = {
  id: 'gpu-1',
  rootfs: '/images/x/rootfs',
  args: ['python3', 'serve.py'],
  env: ['PATH=/usr/local/bin:/usr/bin'],
  cwd: '/',
  user: { uid: 65534, gid: 65534 },
  tmpBytes: 1 << 20,
  shmBytes: 1 << 20,
  network: 'host' as const,
  imageMounts: [],
  volumes: [],
  cgroupsPath: '/tern/gpu-1',
  annotations: {},
  limitSwap: false,
};

describe('NVIDIA discovery', () => {
  it('keeps only the driver libraries of this architecture', () => {
    expect(parseLdconfig(LDCONFIG, 'x64')).toEqual([
      { name: 'libnvidia-ml.so.1', path: '/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1' },
      { name: 'libcuda.so.1', path: '/usr/lib/x86_64-linux-gnu/libcuda.so.1' },
      { name: 'libcuda.so', path: '/usr/lib/x86_64-linux-gnu/libcuda.so' },
      { name: 'libnvidia-ptxjitcompiler.so.1', path: '/usr/lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.1' },
    ]);
  });

  it('finds GPUs, control nodes, libraries and tools', async () => {
    const host = await discoverNvidia(machine, 'x64');
    expect(host?.gpus).toEqual([
      { index: 0, path: '/dev/nvidia0', major: 195, minor: 0 },
      { index: 1, path: '/dev/nvidia1', major: 195, minor: 1 },
    ]);
    expect(host?.controlDevices.map((d) => d.path)).toEqual(['/dev/nvidiactl', '/dev/nvidia-uvm', '/dev/nvidia-uvm-tools']);
    expect(host?.binaries).toEqual(['/usr/bin/nvidia-smi']);
    expect(await discoverNvidia(fakeHost({}), 'x64')).toBeUndefined();
  });

  it('splits device numbers as glibc does', () => {
    expect(splitDev(BigInt((195 << 8) | 1))).toEqual({ major: 195, minor: 1 });
    const major = 0x12345;
    const minor = 0x6789;
    const dev =
      (BigInt(major & 0xfff) << 8n) | (BigInt(major & 0xfffff000) << 32n) | BigInt(minor & 0xff) | (BigInt(minor & 0xffffff00) << 12n);
    expect(splitDev(dev)).toEqual({ major, minor });
  });
});

describe('GPU injection without CDI', () => {
  it('gives an OCI image the assigned GPU only, the control nodes, the driver read-only under /usr/local/nvidia, and the env', async () => {
    const host = (await discoverNvidia(machine, 'x64'))!;
    const edits = nvidiaEdits(host, { devices: [{ index: 1, uuid: 'GPU-bbb' }] }, { mountDriver: true });
    const c = buildOciConfig({ ...baseInput, edits });
    expect(c.linux.devices?.map((d) => d.path)).toEqual(['/dev/nvidia1', '/dev/nvidiactl', '/dev/nvidia-uvm', '/dev/nvidia-uvm-tools']);
    expect(c.linux.devices?.[0]).toEqual({ path: '/dev/nvidia1', type: 'c', major: 195, minor: 1, fileMode: 0o666, uid: 0, gid: 0 });
    expect(c.linux.resources.devices).toEqual([
      { allow: false, access: 'rwm' },
      { allow: true, type: 'c', major: 195, minor: 1, access: 'rwm' },
      { allow: true, type: 'c', major: 195, minor: 255, access: 'rwm' },
      { allow: true, type: 'c', major: 508, minor: 0, access: 'rwm' },
      { allow: true, type: 'c', major: 508, minor: 1, access: 'rwm' },
    ]);
    const cuda = c.mounts.find((m) => m.destination === `${NVIDIA_LIB_DIR}/libcuda.so.1`);
    expect(cuda).toEqual({
      destination: `${NVIDIA_LIB_DIR}/libcuda.so.1`,
      type: 'bind',
      source: '/usr/lib/x86_64-linux-gnu/libcuda.so.1',
      options: ['bind', 'ro', 'nosuid', 'nodev'],
    });
    expect(c.mounts.find((m) => m.destination === '/usr/local/nvidia/bin/nvidia-smi')?.options).toContain('ro');
    expect(c.process.env).toEqual(
      expect.arrayContaining([
        'NVIDIA_VISIBLE_DEVICES=GPU-bbb',
        'CUDA_VISIBLE_DEVICES=GPU-bbb',
        'NVIDIA_DRIVER_CAPABILITIES=compute,utility',
        `LD_LIBRARY_PATH=${NVIDIA_LIB_DIR}`,
        'PATH=/usr/local/nvidia/bin:/usr/local/bin:/usr/bin',
      ]),
    );
  });

  it('mounts no driver files into the host image, which already sees the host /usr', async () => {
    const host = (await discoverNvidia(machine, 'x64'))!;
    const edits = nvidiaEdits(host, { devices: [{ index: 0 }, { index: 1 }] }, { mountDriver: false });
    expect(edits.mounts).toEqual([]);
    expect(edits.env).toEqual(['NVIDIA_VISIBLE_DEVICES=0,1', 'CUDA_VISIBLE_DEVICES=0,1', 'NVIDIA_DRIVER_CAPABILITIES=compute,utility']);
  });

  it('refuses a GPU the machine does not have', async () => {
    const host = (await discoverNvidia(machine, 'x64'))!;
    expect(() => nvidiaEdits(host, { devices: [{ index: 7 }] }, { mountDriver: true })).toThrow(/GPU 7/);
  });

  it('numbers CUDA devices from 0 inside the container when UUIDs are unknown', () => {
    expect(gpuEnv({ devices: [{ index: 2 }, { index: 3 }] })).toContain('CUDA_VISIBLE_DEVICES=0,1');
    expect(gpuEnv({ devices: [{ index: 2 }, { index: 3 }] })).toContain('NVIDIA_VISIBLE_DEVICES=2,3');
  });

  it('GpuInjector falls back to discovery when there is no CDI spec, and fails without GPUs', async () => {
    const injector = new GpuInjector({ io: machine, cdiDirs: ['/etc/cdi'], arch: 'x64' });
    expect((await injector.edits({ devices: [{ index: 0 }] }, true)).devices?.[0]?.path).toBe('/dev/nvidia0');
    await expect(new GpuInjector({ io: fakeHost({}), cdiDirs: ['/etc/cdi'] }).edits({ devices: [{ index: 0 }] }, true)).rejects.toThrow(
      /no NVIDIA/,
    );
    expect(await new GpuInjector({ io: fakeHost({}) }).edits({ devices: [] }, true)).toEqual({});
  });
});
