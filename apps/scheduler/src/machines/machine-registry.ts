import { Injectable, Logger } from '@nestjs/common';
import { type MachineHeartbeat, type MachineNetworkTested, type MachineState } from '#tern/contracts';
import { type MachineForAdmission, MachinesRepository } from '#tern/persistence';
import { admit } from './admission.js';
import { HeartbeatSnapshotPublisher } from './heartbeat-snapshot-publisher.js';
import { MachineTransitions } from './machine-transitions.js';
import { observeHeartbeat } from './machine-metrics.js';

/** States in which the machine is heartbeating, so admission decides between ready and unschedulable. */
const LIVE: readonly MachineState[] = ['ready', 'unschedulable'];

/**
 * The machine registry's reaction to what agents send: heartbeats keep machines alive and
 * bring them to ready (or unschedulable, when their pool's rules say so); network tests are
 * stored and re-judged at once. Offline detection is the OfflineSweeper's.
 */
@Injectable()
export class MachineRegistry {
  private readonly logger = new Logger('machines');

  constructor(
    private readonly machines: MachinesRepository,
    private readonly transitions: MachineTransitions,
    private readonly snapshots: HeartbeatSnapshotPublisher,
  ) {}

  /**
   * Marks the machine seen now, by the database's clock (the one the sweeper compares with,
   * so an agent's skewed clock cannot flip it offline), then judges its state. Unknown
   * machines are ignored: they must register first. Returns whether the machine is known.
   */
  async recordHeartbeat(beat: MachineHeartbeat): Promise<boolean> {
    const known = await this.machines.transaction(async (tx) => {
      const machine = await tx.recordHeartbeat(beat.machineId, beat.agentVersion ?? null);
      if (!machine) return false;
      // pending: a join token exists but the agent has not registered; its beats only keep time.
      if (machine.state !== 'pending') await this.judge(tx, machine);
      return true;
    });
    if (!known) {
      this.logger.warn({ machineId: beat.machineId }, 'heartbeat from an unregistered machine ignored');
      return false;
    }
    observeHeartbeat(beat.machineId);
    await this.snapshots.put(beat);
    return true;
  }

  /** Keeps the newest test result on the machine and, if it is heartbeating, judges it again. */
  async recordNetworkTest(result: MachineNetworkTested): Promise<void> {
    const test = { nats: result.nats, http: result.http, testedAt: result.testedAt };
    await this.machines.transaction(async (tx) => {
      const machine = await tx.recordNetworkTest(result.machineId, test);
      if (!machine) {
        this.logger.warn({ machineId: result.machineId }, 'network test of an unknown machine, or older than the one stored, ignored');
        return;
      }
      if (LIVE.includes(machine.state)) await this.judge(tx, machine);
    });
  }

  /** ready or unschedulable, by the pool's rules; from offline or registered, a heartbeat decides too. */
  private async judge(tx: MachinesRepository, machine: MachineForAdmission): Promise<void> {
    const verdict = admit(
      { gpus: machine.gpus, networkTest: machine.network?.test },
      { name: machine.pool, allowedGpuTypes: machine.allowedGpuTypes, minNetworkMbps: machine.minNetworkMbps },
    );
    const to: MachineState = verdict.schedulable ? 'ready' : 'unschedulable';
    if (to === machine.state) {
      // Still unschedulable, but perhaps for another reason: keep the reason true, no event.
      if (!verdict.schedulable && verdict.reason !== machine.stateReason) await tx.setStateReason(machine.id, verdict.reason);
      return;
    }
    const reason = verdict.schedulable ? readyReason(machine) : verdict.reason;
    const moved = await this.transitions.move(tx, machine.id, machine.state, to, reason);
    if (moved)
      this.logger.log({ machineId: machine.id, from: machine.state, to, reason }, `machine ${machine.id}: ${machine.state} → ${to}`);
  }
}

function readyReason(machine: MachineForAdmission): string {
  switch (machine.state) {
    case 'registered':
      return 'first heartbeat';
    case 'offline':
      return 'heartbeats resumed';
    default:
      return `meets the requirements of pool "${machine.pool}"`;
  }
}
