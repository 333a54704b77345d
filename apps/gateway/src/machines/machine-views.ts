import { type HeartbeatSnapshot, type MachineDetail, type MachineSummary, type NetworkView, type ReputationView } from '#tern/contracts';
import { type Machine } from '#tern/persistence';

const MIB = 1024 * 1024;

/** The answers of the machines API: one definition, shared with the CLI. */
export type { GpuView, MachineDetail, MachineSummary, NetworkView } from '#tern/contracts';

function network(m: Machine): NetworkView | null {
  const test = m.network?.test;
  if (!test) return null;
  const error = test.http.error ?? test.nats.error;
  return {
    throughputMbps: Math.min(test.nats.throughputMbps, test.http.throughputMbps),
    natsMbps: test.nats.throughputMbps,
    httpMbps: test.http.throughputMbps,
    latencyMs: test.nats.latencyMs,
    ...(error ? { error } : {}),
    testedAt: test.testedAt,
  };
}

export function machineSummary(m: Machine, beat?: HeartbeatSnapshot, reputation?: ReputationView): MachineSummary {
  const gpuStates = new Map((beat?.gpus ?? []).map((g) => [g.index, g.state]));
  return {
    id: m.id,
    pool: m.pool,
    state: m.state,
    stateReason: m.stateReason,
    stateChangedAt: m.stateChangedAt.toISOString(),
    hostname: m.hostname,
    cpu: { model: m.cpuModel, cores: m.cpuCores, threads: m.cpuThreads, usagePercent: beat?.cpuPercent ?? null },
    memory: { totalBytes: m.memoryBytes, usagePercent: beat?.memoryPercent ?? null },
    gpus: m.gpus.map((g) => {
      const { memoryBytes, ...rest } = g;
      const state = gpuStates.get(g.index);
      return { ...rest, memoryMiB: Math.round(memoryBytes / MIB), ...(state ? { state } : {}) };
    }),
    network: network(m),
    lastHeartbeatAt: m.lastHeartbeatAt?.toISOString() ?? null,
    runningContainers: beat ? beat.runningContainers.length : null,
    agentVersion: m.agentVersion,
    registeredAt: m.registeredAt?.toISOString() ?? null,
    reputation: reputation ?? null,
    verification: {
      state: m.verification,
      reason: m.verificationReason,
      checkedAt: m.verificationCheckedAt?.toISOString() ?? null,
    },
  };
}

export function machineDetail(m: Machine, beat?: HeartbeatSnapshot, reputation?: ReputationView): MachineDetail {
  return {
    ...machineSummary(m, beat, reputation),
    os: m.os,
    disks: m.disks,
    networkInterfaces: m.network?.interfaces ?? [],
    joinToken: m.joinTokenHash
      ? { expiresAt: m.joinTokenExpiresAt?.toISOString() ?? null, usedAt: m.joinTokenUsedAt?.toISOString() ?? null }
      : null,
    heartbeat: beat
      ? {
          sentAt: beat.sentAt,
          receivedAt: beat.receivedAt,
          sequence: beat.sequence,
          runningContainers: beat.runningContainers,
          ...(beat.isolation ? { isolation: beat.isolation } : {}),
          ...(beat.builder ? { builder: true } : {}),
          ...(beat.siteCache ? { siteCache: beat.siteCache } : {}),
        }
      : null,
    createdAt: m.createdAt.toISOString(),
    updatedAt: m.updatedAt.toISOString(),
  };
}
