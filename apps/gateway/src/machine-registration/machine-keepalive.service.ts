import { ConflictException, Injectable, ServiceUnavailableException } from '@nestjs/common';
import { MACHINE_BEAT, type MachineHeartbeat, type MachineKeepaliveRequest } from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import { type Machine } from '#tern/persistence';

const MIB = 1024 * 1024;

function percent(value: number | undefined): number {
  return Math.min(100, Math.max(0, value ?? 0));
}

/**
 * beta9's HTTP keepalive, for agents that speak its protocol. It is turned into an ordinary
 * heartbeat on core NATS (MACHINE_BEAT), as an agent sends it, so the scheduler treats both paths alike (ready,
 * offline, the snapshot). The keepalive does not list containers: the beat says none.
 */
@Injectable()
export class MachineKeepaliveService {
  constructor(private readonly messaging: Messaging) {}

  async keepalive(machine: Machine, body: MachineKeepaliveRequest): Promise<{ ok: true }> {
    if (body.machineId !== machine.id) {
      throw new ConflictException(`this machine token belongs to machine "${machine.id}", not "${body.machineId}"`);
    }
    if (body.poolName && body.poolName !== machine.pool) {
      throw new ConflictException(`pool mismatch: machine "${machine.id}" is in pool "${machine.pool}", not "${body.poolName}"`);
    }
    const free = body.metrics?.freeGpuCount;
    const beat: MachineHeartbeat = {
      machineId: machine.id,
      pool: machine.pool,
      sentAt: new Date().toISOString(),
      sequence: 0,
      cpuPercent: percent(body.metrics?.cpuUtilizationPct),
      memoryPercent: percent(body.metrics?.memoryUtilizationPct),
      gpus: machine.gpus.map((g, i) => ({
        index: g.index,
        model: g.model,
        memoryMiB: Math.round(g.memoryBytes / MIB),
        state: free === undefined || i < free ? 'free' : 'busy',
      })),
      runningContainers: [],
      ...(body.agentVersion ? { agentVersion: body.agentVersion } : {}),
    };
    try {
      this.messaging.emit(MACHINE_BEAT, beat, [machine.id]);
    } catch (e) {
      throw new ServiceUnavailableException(`cannot record the keepalive on NATS (${(e as Error).message}); try again`);
    }
    return { ok: true };
  }
}
