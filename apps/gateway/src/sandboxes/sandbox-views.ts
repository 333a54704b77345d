import { SANDBOX_WORKDIR, type SandboxView } from '#tern/contracts';
import type { Sandbox } from '#tern/persistence';

const iso = (d: Date | string | null): string | null => (d === null ? null : new Date(d).toISOString());

/** The path of a public port (the gateway's URL goes before it). */
export const publicPortPath = (token: string) => `/sandbox-public/${token}/`;

export function sandboxView(s: Sandbox): SandboxView {
  const created = new Date(s.createdAt);
  return {
    id: s.id,
    state: s.state,
    state_reason: s.stateReason,
    machine: s.machineId,
    pool: s.pool,
    image: typeof s.spec.image === 'string' ? s.spec.image : 'host',
    workdir: typeof s.spec.workdir === 'string' ? s.spec.workdir : SANDBOX_WORKDIR,
    cpu: s.requested.cpuMillicores / 1000,
    memory_bytes: s.requested.memoryBytes,
    gpu_count: s.requested.gpuCount,
    timeout: s.timeoutSeconds,
    idle_timeout: s.idleTimeoutSeconds,
    ports: s.ports ?? [],
    public_ports: Object.entries(s.publicPorts ?? {}).map(([token, port]) => ({ port, path: publicPortPath(token) })),
    created_at: created.toISOString(),
    started_at: iso(s.startedAt),
    active_at: iso(s.activeAt)!,
    ended_at: iso(s.endedAt),
    expires_at: new Date(created.getTime() + s.timeoutSeconds * 1000).toISOString(),
  };
}
