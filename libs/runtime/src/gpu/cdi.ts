import { join } from 'node:path';
import { parse } from 'yaml';
import type { ContainerEdits } from '../oci/container-edits.js';
import type { OciDevice, OciHook, OciHooks, OciMount } from '../oci/oci-spec.js';
import type { GpuAssignment } from '../types.js';
import { type HostIo, nodeHostIo } from './device-io.js';
import { gpuEnv } from './nvidia.js';

/** The parts of a CDI spec (github.com/cncf-tags/container-device-interface) Tern applies. */
export interface CdiContainerEdits {
  env?: string[];
  deviceNodes?: {
    path: string;
    hostPath?: string;
    type?: 'c' | 'b';
    major?: number;
    minor?: number;
    fileMode?: number;
    uid?: number;
    gid?: number;
  }[];
  mounts?: { hostPath: string; containerPath: string; type?: string; options?: string[] }[];
  hooks?: { hookName: string; path: string; args?: string[]; env?: string[]; timeout?: number }[];
}

export interface CdiSpec {
  cdiVersion: string;
  kind: string;
  devices: { name: string; containerEdits: CdiContainerEdits }[];
  containerEdits?: CdiContainerEdits;
}

export const CDI_DIRS = ['/etc/cdi', '/var/run/cdi'];
export const NVIDIA_CDI_KIND = 'nvidia.com/gpu';

/** Every readable CDI spec in the CDI directories; a broken file is skipped, not fatal. */
export async function loadCdiSpecs(
  dirs: string[] = CDI_DIRS,
  io: Pick<HostIo, 'readdir' | 'readFile'> = nodeHostIo,
  onError?: (file: string, error: unknown) => void,
): Promise<CdiSpec[]> {
  const specs: CdiSpec[] = [];
  for (const dir of dirs) {
    for (const file of (await io.readdir(dir)).sort()) {
      if (!/\.(json|ya?ml)$/.test(file)) continue;
      try {
        const spec = parse(await io.readFile(join(dir, file))) as CdiSpec;
        if (spec && typeof spec.kind === 'string' && Array.isArray(spec.devices)) specs.push(spec);
      } catch (e) {
        onError?.(join(dir, file), e);
      }
    }
  }
  return specs;
}

/**
 * The edits for the assigned GPUs from an NVIDIA CDI spec: the spec's common edits plus each
 * device's (found by UUID, else by index, as nvidia-ctk names them), with device numbers the
 * spec leaves out read from the host. Hooks (e.g. nvidia-ctk's ldcache update) pass through.
 */
export async function cdiEdits(
  spec: CdiSpec,
  assignment: GpuAssignment,
  io: Pick<HostIo, 'statDevice'> = nodeHostIo,
): Promise<ContainerEdits> {
  const chosen = assignment.devices.map((want) => {
    const names = [want.uuid, String(want.index)].filter((n): n is string => !!n);
    const found = names.map((n) => spec.devices.find((d) => d.name === n)).find(Boolean);
    if (!found) throw new Error(`CDI spec ${spec.kind} has no device ${names.join(' or ')}`);
    return found;
  });
  const out: Required<ContainerEdits> = { env: [], devices: [], mounts: [], hooks: {} };
  for (const edits of [spec.containerEdits, ...chosen.map((d) => d.containerEdits)]) {
    if (!edits) continue;
    out.env.push(...(edits.env ?? []));
    for (const node of edits.deviceNodes ?? []) {
      if (out.devices.some((d) => d.path === node.path)) continue;
      out.devices.push(await resolveNode(node, io));
    }
    for (const m of edits.mounts ?? []) {
      if (out.mounts.some((x) => x.destination === m.containerPath)) continue;
      out.mounts.push({
        destination: m.containerPath,
        source: m.hostPath,
        type: m.type ?? 'bind',
        options: m.options ?? ['bind', 'ro', 'nosuid', 'nodev'],
      } satisfies OciMount);
    }
    for (const h of edits.hooks ?? []) {
      const hook: OciHook = {
        path: h.path,
        ...(h.args ? { args: h.args } : {}),
        ...(h.env ? { env: h.env } : {}),
        ...(h.timeout ? { timeout: h.timeout } : {}),
      };
      (out.hooks[h.hookName as keyof OciHooks] ??= []).push(hook);
    }
  }
  out.env.push(...gpuEnv(assignment));
  return out;
}

async function resolveNode(
  node: NonNullable<CdiContainerEdits['deviceNodes']>[number],
  io: Pick<HostIo, 'statDevice'>,
): Promise<OciDevice> {
  let { major, minor, type } = node;
  if (major === undefined || minor === undefined) {
    const host = await io.statDevice(node.hostPath ?? node.path);
    if (!host) throw new Error(`CDI device node ${node.hostPath ?? node.path} is not on this machine`);
    major = host.major;
    minor = host.minor;
    type ??= host.type;
  }
  return {
    path: node.path,
    type: type ?? 'c',
    major,
    minor,
    fileMode: node.fileMode ?? 0o666,
    uid: node.uid ?? 0,
    gid: node.gid ?? 0,
  };
}
