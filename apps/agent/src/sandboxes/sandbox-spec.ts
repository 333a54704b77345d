import { type GpuInventory, SANDBOX_WORKDIR, type SandboxCreate } from '#tern/contracts';
import type { ContainerSpec } from '#tern/runtime';
import { CONTAINER_PIDS_LIMIT, gpuDevices } from '../containers/container-spec.js';
import { sandboxLabels, type SandboxRecord } from './sandbox-labels.js';

/** Where a sandbox's files are on this machine, made ready before its container starts. */
export interface SandboxDirs {
  /** Its writable /workspace when it was filled from the image (the runtime then gives every file to the sandbox's user). */
  workspace?: string;
  /** The workspace volumes VolumeMounts materialized, by volume name. */
  volumes: Record<string, string>;
}

/** The runtime volume of a sandbox's /workspace (`<stateDir>/volumes/sandboxes/<id>`). */
export const sandboxVolumeName = (sandboxId: string) => `sandboxes/${sandboxId}`;

/**
 * The runtime spec of a sandbox's container: `sleep infinity` keeps it alive (its processes are
 * execs), /workspace its writable volume, the GPUs it holds handed over as a deployment's
 * container gets them, the sealed-container network narrowed by the create's `network`.
 */
export function toSandboxSpec(
  cmd: SandboxCreate,
  record: SandboxRecord,
  machineId: string,
  gpus: readonly GpuInventory[],
  dirs: SandboxDirs,
  network: 'private' | 'host',
): ContainerSpec {
  return {
    id: cmd.sandboxId,
    image: cmd.image,
    args: ['sleep', 'infinity'],
    env: {
      ...cmd.env,
      TERN_SANDBOX_ID: cmd.sandboxId,
      TERN_WORKSPACE_ID: cmd.workspaceId,
      TERN_MACHINE_ID: machineId,
      ...(gpus.length ? { TERN_GPU_COUNT: String(gpus.length) } : {}),
    },
    cwd: SANDBOX_WORKDIR,
    memoryBytes: cmd.resources.memoryBytes,
    cpuMillicores: cmd.resources.cpuMillicores,
    pidsLimit: CONTAINER_PIDS_LIMIT,
    volumes: [
      { name: sandboxVolumeName(cmd.sandboxId), containerPath: SANDBOX_WORKDIR, ...(dirs.workspace ? { hostPath: dirs.workspace } : {}) },
      ...(cmd.volumes ?? []).map((v) => ({
        name: `${cmd.workspaceId}/${v.volume}`,
        containerPath: v.mountPath,
        readOnly: v.readOnly,
        hostPath: dirs.volumes[v.volume],
      })),
    ],
    ...gpuDevices(gpus),
    network,
    ...(network === 'private'
      ? { egress: cmd.network?.block ? { block: true } : cmd.network?.allow ? { allow: [...cmd.network.allow] } : {} }
      : {}),
    labels: sandboxLabels(record, machineId),
  };
}
