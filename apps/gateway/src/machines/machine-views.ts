import { type HeartbeatSnapshot, type MachineState } from '#tern/contracts';
import { type Machine, type MachineDisk, type MachineNetworkInterface, type MachineOs } from '#tern/persistence';
import { type ReputationView } from './reputation-reader.js';

const MIB = 1024 * 1024;

export interface GpuView {
  index: number;
  model: string;
  memoryMiB: number;
  vendor?: string;
  driverVersion?: string;
  cudaVersion?: string;
  uuid?: string;
  /** From the last heartbeat; absent when none is recent. */
  state?: 'free' | 'busy';
}

export interface NetworkView {
  /** The slower of the two legs: what pool minimums are compared with. */
  throughputMbps: number;
  natsMbps: number;
  httpMbps: number;
  latencyMs: number;
  error?: string;
  testedAt: string;
}

export interface MachineSummary {
  id: string;
  pool: string;
  state: MachineState;
  stateReason: string | null;
  stateChangedAt: Date;
  hostname: string | null;
  /** usagePercent comes from the last heartbeat and is null when none is recent. */
  cpu: { model: string | null; cores: number | null; threads: number | null; usagePercent: number | null };
  memory: { totalBytes: number | null; usagePercent: number | null };
  gpus: GpuView[];
  /** The latest network test; null until the agent has reported one. */
  network: NetworkView | null;
  lastHeartbeatAt: Date | null;
  agentVersion: string | null;
  registeredAt: Date | null;
  /** The current reputation score and its components; null until the reputation service has scored it. */
  reputation: ReputationView | null;
}

export interface MachineDetail extends MachineSummary {
  os: MachineOs | null;
  disks: MachineDisk[];
  networkInterfaces: MachineNetworkInterface[];
  joinToken: { expiresAt: Date | null; usedAt: Date | null } | null;
  heartbeat: { sentAt: string; receivedAt: string; sequence: number; runningContainers: string[] } | null;
  createdAt: Date;
  updatedAt: Date;
}

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
    stateChangedAt: m.stateChangedAt,
    hostname: m.hostname,
    cpu: { model: m.cpuModel, cores: m.cpuCores, threads: m.cpuThreads, usagePercent: beat?.cpuPercent ?? null },
    memory: { totalBytes: m.memoryBytes, usagePercent: beat?.memoryPercent ?? null },
    gpus: m.gpus.map((g) => {
      const { memoryBytes, ...rest } = g;
      const state = gpuStates.get(g.index);
      return { ...rest, memoryMiB: Math.round(memoryBytes / MIB), ...(state ? { state } : {}) };
    }),
    network: network(m),
    lastHeartbeatAt: m.lastHeartbeatAt,
    agentVersion: m.agentVersion,
    registeredAt: m.registeredAt,
    reputation: reputation ?? null,
  };
}

export function machineDetail(m: Machine, beat?: HeartbeatSnapshot, reputation?: ReputationView): MachineDetail {
  return {
    ...machineSummary(m, beat, reputation),
    os: m.os,
    disks: m.disks,
    networkInterfaces: m.network?.interfaces ?? [],
    joinToken: m.joinTokenHash ? { expiresAt: m.joinTokenExpiresAt, usedAt: m.joinTokenUsedAt } : null,
    heartbeat: beat
      ? { sentAt: beat.sentAt, receivedAt: beat.receivedAt, sequence: beat.sequence, runningContainers: beat.runningContainers }
      : null,
    createdAt: m.createdAt,
    updatedAt: m.updatedAt,
  };
}
