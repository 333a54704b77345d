import type { NetworkMode, UserSpec } from '../types.js';
import { applyEdits, type ContainerEdits, setEnv } from './container-edits.js';
import type { OciMount, OciNamespace, OciSpec } from './oci-spec.js';
import { defaultSeccompProfile } from './seccomp.js';

export interface VolumeBind {
  source: string;
  destination: string;
  readOnly: boolean;
}

/** Everything config.json depends on, already resolved (image, volume paths, env, GPU edits). */
export interface OciConfigInput {
  id: string;
  /** Absolute path of the (shared, read-only) root filesystem. */
  rootfs: string;
  args: string[];
  /** `KEY=value`, see buildEnv(). */
  env: string[];
  cwd: string;
  user: UserSpec;
  memoryBytes?: number;
  cpuMillicores?: number;
  pidsLimit?: number;
  tmpBytes: number;
  shmBytes: number;
  network: NetworkMode;
  /** `private` network: the namespace the agent prepared (`/run/netns/<name>`), which the container joins. */
  netnsPath?: string;
  /** Read-only binds the image itself needs (the host image's /usr, …). */
  imageMounts: OciMount[];
  volumes: VolumeBind[];
  edits?: ContainerEdits;
  cgroupsPath: string;
  annotations: Record<string, string>;
  /** Pin memory+swap to the memory limit (needs swap accounting: memory.memsw.* on cgroup v1). */
  limitSwap: boolean;
  arch?: string;
  /** RLIMIT_NOFILE; runc cannot raise it past its own hard limit without CAP_SYS_RESOURCE. */
  nofile?: number;
  /** Container ids 0…size-1 are host ids hostId…; absent: no user namespace (ids are the host's). */
  userNamespace?: UserNamespaceMapping;
}

/** A user namespace's one contiguous range: container uid/gid n is host uid/gid hostId + n. */
export interface UserNamespaceMapping {
  hostId: number;
  size: number;
}

export const CPU_PERIOD_US = 100_000;
export const DEFAULT_NOFILE = 16_384;

const ALL_DROPPED = { bounding: [], effective: [], permitted: [], inheritable: [], ambient: [] };

/** runc's defaults: kernel interfaces a container has no business reading or writing. */
const MASKED_PATHS = [
  '/proc/acpi',
  '/proc/asound',
  '/proc/kcore',
  '/proc/keys',
  '/proc/latency_stats',
  '/proc/timer_list',
  '/proc/timer_stats',
  '/proc/sched_debug',
  '/proc/scsi',
  '/sys/firmware',
  '/sys/devices/virtual/powercap',
];
const READONLY_PATHS = ['/proc/bus', '/proc/fs', '/proc/irq', '/proc/sys', '/proc/sysrq-trigger'];

export function buildOciConfig(input: OciConfigInput): OciSpec {
  const userns = input.userNamespace;
  const config: OciSpec = {
    ociVersion: '1.0.2',
    process: {
      terminal: false,
      user: { uid: input.user.uid, gid: input.user.gid },
      args: input.args,
      env: input.env,
      cwd: input.cwd,
      capabilities: ALL_DROPPED,
      rlimits: [{ type: 'RLIMIT_NOFILE', hard: input.nofile ?? DEFAULT_NOFILE, soft: input.nofile ?? DEFAULT_NOFILE }],
      noNewPrivileges: true,
    },
    root: { path: input.rootfs, readonly: true },
    hostname: hostnameFor(input.id),
    mounts: mountsFor(input),
    linux: {
      namespaces: namespacesFor(input),
      ...(userns
        ? {
            uidMappings: [{ containerID: 0, hostID: userns.hostId, size: userns.size }],
            gidMappings: [{ containerID: 0, hostID: userns.hostId, size: userns.size }],
          }
        : {}),
      resources: {
        devices: [{ allow: false, access: 'rwm' }],
        ...(input.memoryBytes ? { memory: { limit: input.memoryBytes, ...(input.limitSwap ? { swap: input.memoryBytes } : {}) } } : {}),
        ...(input.cpuMillicores ? { cpu: cpuFor(input.cpuMillicores) } : {}),
        ...(input.pidsLimit ? { pids: { limit: input.pidsLimit } } : {}),
      },
      cgroupsPath: input.cgroupsPath,
      seccomp: defaultSeccompProfile(input.arch),
      maskedPaths: MASKED_PATHS,
      readonlyPaths: READONLY_PATHS,
    },
    annotations: input.annotations,
  };
  return input.edits ? applyEdits(config, input.edits) : config;
}

/**
 * Own pid, ipc, uts, mount and cgroup namespaces always; the network namespace is the one
 * prepared for it on the agent's bridge (private), a new empty one (none), or the host's.
 */
function namespacesFor(input: OciConfigInput): OciNamespace[] {
  const namespaces: OciNamespace[] = [{ type: 'pid' }, { type: 'ipc' }, { type: 'uts' }, { type: 'mount' }, { type: 'cgroup' }];
  if (input.network === 'private') {
    if (!input.netnsPath) throw new Error('a private network needs the path of its network namespace');
    namespaces.push({ type: 'network', path: input.netnsPath });
  }
  if (input.network === 'none') namespaces.push({ type: 'network' });
  if (input.userNamespace) namespaces.push({ type: 'user' });
  return namespaces;
}

/** The kernel's filesystems, private tmpfs for /dev, /dev/shm and /tmp, then the image's mounts and the volumes. */
function mountsFor(input: OciConfigInput): OciMount[] {
  // sysfs can only be mounted by a user namespace that owns the network namespace: with the
  // host's network or one the agent prepared, a container in its own user namespace gets the host's /sys bound read-only.
  const sys: OciMount =
    input.userNamespace && input.network !== 'none'
      ? { destination: '/sys', type: 'none', source: '/sys', options: ['rbind', 'nosuid', 'noexec', 'nodev', 'ro'] }
      : { destination: '/sys', type: 'sysfs', source: 'sysfs', options: ['nosuid', 'noexec', 'nodev', 'ro'] };
  return [
    { destination: '/proc', type: 'proc', source: 'proc', options: ['nosuid', 'noexec', 'nodev'] },
    { destination: '/dev', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'strictatime', 'mode=755', 'size=65536k'] },
    {
      destination: '/dev/pts',
      type: 'devpts',
      source: 'devpts',
      options: ['nosuid', 'noexec', 'newinstance', 'ptmxmode=0666', 'mode=0620', 'gid=5'],
    },
    {
      destination: '/dev/shm',
      type: 'tmpfs',
      source: 'shm',
      options: ['nosuid', 'noexec', 'nodev', 'mode=1777', `size=${input.shmBytes}`],
    },
    { destination: '/dev/mqueue', type: 'mqueue', source: 'mqueue', options: ['nosuid', 'noexec', 'nodev'] },
    sys,
    {
      destination: '/sys/fs/cgroup',
      type: 'cgroup',
      source: 'cgroup',
      options: ['nosuid', 'noexec', 'nodev', 'relatime', 'ro'],
    },
    {
      destination: '/tmp',
      type: 'tmpfs',
      source: 'tmpfs',
      options: ['nosuid', 'nodev', 'mode=1777', `size=${input.tmpBytes}`],
    },
    ...input.imageMounts,
    ...input.volumes.map((v): OciMount => ({
      destination: v.destination,
      type: 'bind',
      source: v.source,
      options: ['rbind', 'rprivate', 'nosuid', 'nodev', v.readOnly ? 'ro' : 'rw'],
    })),
  ];
}

export function cpuFor(millicores: number): { quota: number; period: number; shares: number } {
  return {
    period: CPU_PERIOD_US,
    // The kernel refuses a quota under 1 ms.
    quota: Math.max(1000, Math.round((millicores * CPU_PERIOD_US) / 1000)),
    shares: Math.max(2, Math.round((millicores * 1024) / 1000)),
  };
}

function hostnameFor(id: string): string {
  return (
    id
      .toLowerCase()
      .replace(/[^a-z0-9-]/g, '-')
      .slice(0, 63)
      .replace(/^-+|-+$/g, '') || 'tern'
  );
}

export const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/**
 * The container's environment, lowest precedence first: Tern's defaults, the image's, the
 * PORT it must listen on, then the user's (which may override anything but PORT).
 */
export function buildEnv(options: { imageEnv: string[]; userEnv?: Record<string, string>; port?: number; containerId: string }): string[] {
  let env = [`PATH=${DEFAULT_PATH}`, 'HOME=/tmp', 'PYTHONUNBUFFERED=1', 'LANG=C.UTF-8'];
  for (const e of options.imageEnv) env = setEnv(env, e, false);
  env = setEnv(env, `TERN_CONTAINER_ID=${options.containerId}`, false);
  for (const [k, v] of Object.entries(options.userEnv ?? {})) env = setEnv(env, `${k}=${v}`, false);
  if (options.port !== undefined) env = setEnv(env, `PORT=${options.port}`, false);
  return env;
}
