/** Labels of a sandbox's container: after an agent restart they say whose it is and how it runs. */
export const SANDBOX_LABEL = {
  sandbox: 'tern.sandbox',
  machine: 'tern.machine',
  workspace: 'tern.workspace',
  workdir: 'tern.sandbox-workdir',
  /** Comma-separated `vendor:index` of the GPUs it holds (as a container's `tern.gpus`). */
  gpus: 'tern.gpus',
} as const;

export interface SandboxRecord {
  sandboxId: string;
  workspaceId: string;
  workdir: string;
  /** `vendor:index` of the GPUs it holds. */
  gpus: string[];
}

/** The sandbox a container found in the runtime is, if this agent started it for this machine. */
export function sandboxFromLabels(id: string, labels: Record<string, string>, machineId: string): SandboxRecord | undefined {
  if (labels[SANDBOX_LABEL.sandbox] !== id || labels[SANDBOX_LABEL.machine] !== machineId) return undefined;
  if (!labels[SANDBOX_LABEL.workspace] || !labels[SANDBOX_LABEL.workdir]?.startsWith('/')) return undefined;
  return {
    sandboxId: id,
    workspaceId: labels[SANDBOX_LABEL.workspace],
    workdir: labels[SANDBOX_LABEL.workdir],
    gpus: (labels[SANDBOX_LABEL.gpus] ?? '').split(',').filter(Boolean),
  };
}

export function sandboxLabels(record: SandboxRecord, machineId: string): Record<string, string> {
  return {
    [SANDBOX_LABEL.sandbox]: record.sandboxId,
    [SANDBOX_LABEL.machine]: machineId,
    [SANDBOX_LABEL.workspace]: record.workspaceId,
    [SANDBOX_LABEL.workdir]: record.workdir,
    [SANDBOX_LABEL.gpus]: record.gpus.join(','),
  };
}
