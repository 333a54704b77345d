import { basename } from 'node:path';
import type { ContainerEdits } from '../oci/container-edits.js';
import type { OciDevice, OciMount } from '../oci/oci-spec.js';
import type { GpuAssignment } from '../types.js';
import { type HostIo, nodeHostIo } from './device-io.js';

export interface HostDevice {
  path: string;
  major: number;
  minor: number;
}

/** The NVIDIA driver as installed on this machine. */
export interface NvidiaHost {
  gpus: (HostDevice & { index: number })[];
  /** nvidiactl, nvidia-uvm, nvidia-uvm-tools, nvidia-modeset: every GPU container needs them. */
  controlDevices: HostDevice[];
  /** Driver libraries by the name the loader looks for (`libcuda.so.1`) and where they are. */
  libraries: { name: string; path: string }[];
  binaries: string[];
}

/** Where injected driver files appear in OCI images: the path CUDA base images already search. */
export const NVIDIA_LIB_DIR = '/usr/local/nvidia/lib64';
export const NVIDIA_BIN_DIR = '/usr/local/nvidia/bin';

const CONTROL_DEVICES = ['nvidiactl', 'nvidia-uvm', 'nvidia-uvm-tools', 'nvidia-modeset'];

/** The compute and utility libraries of the driver (what nvidia-container-cli mounts for those capabilities). */
const DRIVER_LIBRARIES = [
  'libcuda.so',
  'libcudadebugger.so',
  'libnvidia-ml.so',
  'libnvidia-cfg.so',
  'libnvidia-ptxjitcompiler.so',
  'libnvidia-nvvm.so',
  'libnvidia-gpucomp.so',
  'libnvidia-opencl.so',
  'libnvidia-allocator.so',
  'libnvidia-compiler.so',
  'libnvidia-fatbinaryloader.so',
  'libnvcuvid.so',
  'libnvidia-encode.so',
  'libnvidia-opticalflow.so',
];

const DRIVER_BINARIES = ['nvidia-smi', 'nvidia-debugdump', 'nvidia-persistenced', 'nvidia-cuda-mps-control', 'nvidia-cuda-mps-server'];
const BIN_DIRS = ['/usr/bin', '/usr/local/bin', '/usr/sbin', '/bin'];

const LDCONFIG_ARCH: Record<string, string> = { x64: 'x86-64', arm64: 'AArch64', ppc64: 'PPC64' };

/** Driver libraries in `ldconfig -p` output, for the given CPU architecture only. */
export function parseLdconfig(output: string, arch: string = process.arch): { name: string; path: string }[] {
  const tag = LDCONFIG_ARCH[arch] ?? 'x86-64';
  const found: { name: string; path: string }[] = [];
  for (const line of output.split('\n')) {
    const m = /^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)\s*$/.exec(line);
    if (!m) continue;
    const [, name, flags, path] = m as unknown as [string, string, string, string];
    if (!flags.split(',').includes(tag)) continue;
    if (!DRIVER_LIBRARIES.some((lib) => name === lib || name.startsWith(`${lib}.`))) continue;
    if (!found.some((f) => f.name === name)) found.push({ name, path });
  }
  return found;
}

/** What the NVIDIA driver exposes on this machine; undefined when it has no NVIDIA GPU. */
export async function discoverNvidia(io: HostIo = nodeHostIo, arch: string = process.arch): Promise<NvidiaHost | undefined> {
  const entries = await io.readdir('/dev');
  const gpus: NvidiaHost['gpus'] = [];
  for (const e of entries) {
    const m = /^nvidia(\d+)$/.exec(e);
    if (!m) continue;
    const dev = await io.statDevice(`/dev/${e}`);
    if (dev) gpus.push({ index: Number(m[1]), path: `/dev/${e}`, major: dev.major, minor: dev.minor });
  }
  if (!gpus.length) return undefined;
  gpus.sort((a, b) => a.index - b.index);
  const controlDevices: HostDevice[] = [];
  for (const name of CONTROL_DEVICES) {
    const dev = await io.statDevice(`/dev/${name}`);
    if (dev) controlDevices.push({ path: `/dev/${name}`, major: dev.major, minor: dev.minor });
  }
  const binaries: string[] = [];
  for (const bin of DRIVER_BINARIES) {
    for (const dir of BIN_DIRS) {
      if (await io.exists(`${dir}/${bin}`)) {
        binaries.push(`${dir}/${bin}`);
        break;
      }
    }
  }
  return { gpus, controlDevices, libraries: parseLdconfig(await io.ldconfig(), arch), binaries };
}

/**
 * The env a GPU container gets. UUIDs when every device has one: CUDA accepts them and they
 * name the same GPU whatever order it enumerates in; otherwise the container's own ordinals.
 */
export function gpuEnv(assignment: GpuAssignment): string[] {
  const all = assignment.devices;
  const uuids = all.every((d) => d.uuid) ? all.map((d) => d.uuid!) : undefined;
  return [
    `NVIDIA_VISIBLE_DEVICES=${uuids ? uuids.join(',') : all.map((d) => d.index).join(',')}`,
    `CUDA_VISIBLE_DEVICES=${uuids ? uuids.join(',') : all.map((_, i) => i).join(',')}`,
    'NVIDIA_DRIVER_CAPABILITIES=compute,utility',
  ];
}

const device = (d: HostDevice): OciDevice => ({ path: d.path, type: 'c', major: d.major, minor: d.minor, fileMode: 0o666, uid: 0, gid: 0 });
const roBind = (source: string, destination: string): OciMount => ({
  destination,
  type: 'bind',
  source,
  options: ['bind', 'ro', 'nosuid', 'nodev'],
});

/**
 * Without CDI: the assigned GPUs' device nodes plus the control nodes, and (for images that
 * do not already see the host's /usr) the driver libraries and tools bound read-only under
 * /usr/local/nvidia, which LD_LIBRARY_PATH and PATH then name.
 */
export function nvidiaEdits(host: NvidiaHost, assignment: GpuAssignment, options: { mountDriver: boolean }): ContainerEdits {
  const devices: OciDevice[] = [];
  for (const want of assignment.devices) {
    const gpu = host.gpus.find((g) => g.index === want.index);
    if (!gpu) throw new Error(`GPU ${want.index} is not on this machine (found ${host.gpus.map((g) => g.index).join(', ') || 'none'})`);
    devices.push(device(gpu));
  }
  devices.push(...host.controlDevices.map(device));
  const env = gpuEnv(assignment);
  const mounts: OciMount[] = [];
  if (options.mountDriver) {
    mounts.push(...host.libraries.map((l) => roBind(l.path, `${NVIDIA_LIB_DIR}/${l.name}`)));
    mounts.push(...host.binaries.map((b) => roBind(b, `${NVIDIA_BIN_DIR}/${basename(b)}`)));
    env.push(`LD_LIBRARY_PATH=${NVIDIA_LIB_DIR}`);
    if (host.binaries.length) env.push(`PATH=${NVIDIA_BIN_DIR}`);
  }
  return { env, devices, mounts };
}
