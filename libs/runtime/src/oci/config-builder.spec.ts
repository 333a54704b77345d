import { buildEnv, buildOciConfig, cpuFor, type OciConfigInput } from './config-builder.js';
import { applyEdits, setEnv } from './container-edits.js';

const base: OciConfigInput = {
  id: 'c_1.web',
  rootfs: '/var/lib/tern/images/host/abc/rootfs',
  args: ['python3', 'app.py'],
  env: ['PATH=/usr/bin', 'PORT=8080'],
  cwd: '/',
  user: { uid: 65534, gid: 65534 },
  tmpBytes: 1024,
  shmBytes: 2048,
  network: 'host',
  imageMounts: [{ destination: '/usr', type: 'bind', source: '/usr', options: ['rbind', 'ro', 'nosuid', 'nodev'] }],
  volumes: [],
  cgroupsPath: '/tern/c_1.web',
  annotations: { 'dev.tern.managed': 'true' },
  limitSwap: true,
  arch: 'x64',
};

describe('buildOciConfig', () => {
  it('maps container ids onto the host range in a user namespace, with the host /sys bound when the network is the host', () => {
    const c = buildOciConfig({ ...base, userNamespace: { hostId: 300_000, size: 65_536 } });
    expect(c.linux.namespaces.map((n) => n.type)).toContain('user');
    expect(c.linux.uidMappings).toEqual([{ containerID: 0, hostID: 300_000, size: 65_536 }]);
    expect(c.linux.gidMappings).toEqual([{ containerID: 0, hostID: 300_000, size: 65_536 }]);
    expect(c.mounts.find((m) => m.destination === '/sys')).toEqual({
      destination: '/sys',
      type: 'none',
      source: '/sys',
      options: ['rbind', 'nosuid', 'noexec', 'nodev', 'ro'],
    });
    const ownNetwork = buildOciConfig({ ...base, network: 'none', userNamespace: { hostId: 300_000, size: 65_536 } });
    expect(ownNetwork.mounts.find((m) => m.destination === '/sys')?.type).toBe('sysfs');
    const none = buildOciConfig(base);
    expect(none.linux.uidMappings).toBeUndefined();
    expect(none.mounts.find((m) => m.destination === '/sys')?.type).toBe('sysfs');
  });

  it('has safe defaults: no capabilities, no new privileges, read-only root, seccomp, own namespaces but the host network', () => {
    const c = buildOciConfig(base);
    expect(c.process.capabilities).toEqual({ bounding: [], effective: [], permitted: [], inheritable: [], ambient: [] });
    expect(c.process.noNewPrivileges).toBe(true);
    expect(c.process.terminal).toBe(false);
    expect(c.process.user).toEqual({ uid: 65534, gid: 65534 });
    expect(c.root).toEqual({ path: base.rootfs, readonly: true });
    expect(c.linux.namespaces.map((n) => n.type).sort()).toEqual(['cgroup', 'ipc', 'mount', 'pid', 'uts']);
    expect(c.linux.seccomp?.defaultAction).toBe('SCMP_ACT_ERRNO');
    expect(c.linux.seccomp?.architectures).toContain('SCMP_ARCH_X86_64');
    const allowed = c.linux.seccomp!.syscalls.filter((s) => s.action === 'SCMP_ACT_ALLOW').flatMap((s) => s.names);
    expect(allowed).toEqual(expect.arrayContaining(['read', 'write', 'execve', 'arch_prctl', 'clone']));
    expect(allowed).not.toEqual(expect.arrayContaining(['mount']));
    expect(allowed.filter((n) => n.startsWith('io_uring') || ['kexec_load', 'bpf', 'unshare', 'setns'].includes(n))).toEqual([]);
    expect(c.linux.resources.devices).toEqual([{ allow: false, access: 'rwm' }]);
    expect(c.linux.maskedPaths).toContain('/proc/kcore');
    expect(c.linux.cgroupsPath).toBe('/tern/c_1.web');
    expect(c.hostname).toBe('c-1-web');
    expect(c.annotations).toEqual({ 'dev.tern.managed': 'true' });
  });

  it('joins the namespace the agent prepared for a private network (and binds /sys under a user namespace)', () => {
    const c = buildOciConfig({ ...base, network: 'private', netnsPath: '/run/netns/tern-abc' });
    expect(c.linux.namespaces).toContainEqual({ type: 'network', path: '/run/netns/tern-abc' });
    const userns = buildOciConfig({
      ...base,
      network: 'private',
      netnsPath: '/run/netns/tern-abc',
      userNamespace: { hostId: 1, size: 65_536 },
    });
    expect(userns.mounts.find((m) => m.destination === '/sys')?.type).toBe('none');
    expect(() => buildOciConfig({ ...base, network: 'private' })).toThrow(/path of its network namespace/);
  });

  it('gives a private network namespace when asked for none', () => {
    expect(buildOciConfig({ ...base, network: 'none' }).linux.namespaces).toContainEqual({ type: 'network' });
  });

  it('mounts tmpfs /tmp and /dev/shm with their sizes, then the image binds, then volumes ro or rw', () => {
    const c = buildOciConfig({
      ...base,
      volumes: [
        { source: '/vol/a', destination: '/data', readOnly: false },
        { source: '/vol/b', destination: '/models', readOnly: true },
      ],
    });
    const byDest = Object.fromEntries(c.mounts.map((m) => [m.destination, m]));
    expect(byDest['/tmp']).toMatchObject({ type: 'tmpfs', options: expect.arrayContaining(['mode=1777', 'size=1024', 'nosuid', 'nodev']) });
    expect(byDest['/dev/shm']?.options).toContain('size=2048');
    expect(byDest['/usr']).toMatchObject({ type: 'bind', source: '/usr', options: expect.arrayContaining(['ro']) });
    expect(byDest['/data']).toMatchObject({ source: '/vol/a', options: expect.arrayContaining(['rbind', 'rw', 'nosuid', 'nodev']) });
    expect(byDest['/models']?.options).toContain('ro');
    const order = c.mounts.map((m) => m.destination);
    expect(order.indexOf('/tmp')).toBeLessThan(order.indexOf('/usr'));
    expect(order.indexOf('/usr')).toBeLessThan(order.indexOf('/data'));
  });

  it('sets memory (swap pinned to it when accounted), CPU quota and shares, pids and RLIMIT_NOFILE', () => {
    const c = buildOciConfig({ ...base, memoryBytes: 512 << 20, cpuMillicores: 1500, pidsLimit: 100, nofile: 4096 });
    expect(c.linux.resources.memory).toEqual({ limit: 512 << 20, swap: 512 << 20 });
    expect(c.linux.resources.cpu).toEqual({ period: 100_000, quota: 150_000, shares: 1536 });
    expect(c.linux.resources.pids).toEqual({ limit: 100 });
    expect(c.process.rlimits).toEqual([{ type: 'RLIMIT_NOFILE', hard: 4096, soft: 4096 }]);
    expect(buildOciConfig({ ...base, memoryBytes: 1 << 30, limitSwap: false }).linux.resources.memory).toEqual({ limit: 1 << 30 });
    expect(buildOciConfig(base).linux.resources).toEqual({ devices: [{ allow: false, access: 'rwm' }] });
  });

  it('keeps the CPU quota at or above the kernel minimum', () => {
    expect(cpuFor(1)).toEqual({ period: 100_000, quota: 1000, shares: 2 });
  });
});

describe('buildEnv', () => {
  it('layers defaults, image env, user env; PORT always wins', () => {
    const env = buildEnv({
      imageEnv: ['PATH=/opt/bin:/usr/bin', 'LANG=en_US.UTF-8', 'FROM_IMAGE=1'],
      userEnv: { FROM_IMAGE: '2', PORT: '1', HOME: '/work' },
      port: 9000,
      containerId: 'c1',
    });
    expect(env).toEqual(
      expect.arrayContaining([
        'PATH=/opt/bin:/usr/bin',
        'LANG=en_US.UTF-8',
        'FROM_IMAGE=2',
        'PORT=9000',
        'HOME=/work',
        'PYTHONUNBUFFERED=1',
        'TERN_CONTAINER_ID=c1',
      ]),
    );
    expect(env.filter((e) => e.startsWith('PORT='))).toEqual(['PORT=9000']);
  });
});

describe('container edits', () => {
  it('prepends PATH-like variables and replaces the rest', () => {
    expect(setEnv(['PATH=/usr/bin', 'A=1'], 'PATH=/usr/local/nvidia/bin')).toEqual(['PATH=/usr/local/nvidia/bin:/usr/bin', 'A=1']);
    expect(setEnv(['A=1'], 'A=2')).toEqual(['A=2']);
    expect(setEnv(['A=1'], 'LD_LIBRARY_PATH=/x')).toEqual(['A=1', 'LD_LIBRARY_PATH=/x']);
  });

  it('adds devices with a cgroup rule each, mounts and hooks', () => {
    const c = applyEdits(buildOciConfig(base), {
      devices: [{ path: '/dev/nvidia0', type: 'c', major: 195, minor: 0 }],
      mounts: [{ destination: '/x', source: '/y', type: 'bind', options: ['ro'] }],
      hooks: { createContainer: [{ path: '/usr/bin/nvidia-ctk', args: ['nvidia-ctk', 'hook'] }] },
      env: ['NVIDIA_VISIBLE_DEVICES=0'],
    });
    expect(c.linux.devices).toEqual([{ path: '/dev/nvidia0', type: 'c', major: 195, minor: 0 }]);
    expect(c.linux.resources.devices).toContainEqual({ allow: true, type: 'c', major: 195, minor: 0, access: 'rwm' });
    expect(c.mounts.at(-1)).toEqual({ destination: '/x', source: '/y', type: 'bind', options: ['ro'] });
    expect(c.hooks?.createContainer).toHaveLength(1);
    expect(c.process.env).toContain('NVIDIA_VISIBLE_DEVICES=0');
  });
});
