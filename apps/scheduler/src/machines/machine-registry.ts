import { Injectable, Logger } from '@nestjs/common';
import { type MachineHeartbeat, type MachineNetworkTested, type MachineState } from '#tern/contracts';
import { GroupCommit, type MachineForAdmission, type MachineMove, MachinesRepository } from '#tern/persistence';
import { admit } from './admission.js';
import { HeartbeatSnapshotPublisher } from './heartbeat-snapshot-publisher.js';
import { observeHeartbeat } from './machine-metrics.js';
import { MachineStateRelay } from './machine-state-relay.js';

/** States in which the machine is heartbeating, so admission decides between ready and unschedulable. */
const LIVE: readonly MachineState[] = ['ready', 'unschedulable'];

/**
 * Heartbeats are written by group commit: beats that arrive while a batch is in flight go together
 * in the next transaction, up to this many, rather than a transaction each (bench/agents: per-beat
 * transactions queued on the machines' row locks past 2,000 agents). The heartbeat consumer's
 * concurrency must exceed it for batches to fill.
 */
export const HEARTBEAT_BATCH = 500;

/**
 * How long the first beat after a quiet moment waits for others before its batch goes. Without,
 * beats arriving evenly (a fleet's, each on its own ticker) mostly found the writer idle and went
 * alone or in pairs: a transaction per beat or two (bench/agents README). Reputation waits as long
 * (MachineBook); a beat's lag grows by at most this.
 */
export const HEARTBEAT_LINGER_MS = 50;

/**
 * The machine registry's reaction to what agents send: heartbeats keep machines alive and
 * bring them to ready (or unschedulable, when their pool's rules say so); network tests are
 * stored and re-judged at once. Offline detection is the OfflineSweeper's.
 */
@Injectable()
export class MachineRegistry {
  private readonly logger = new Logger('machines');
  private readonly beats = new GroupCommit<MachineHeartbeat, boolean>((beats) => this.recordBatch(beats), {
    maxBatch: HEARTBEAT_BATCH,
    lingerMs: HEARTBEAT_LINGER_MS,
  });

  constructor(
    private readonly machines: MachinesRepository,
    private readonly relay: MachineStateRelay,
    private readonly snapshots: HeartbeatSnapshotPublisher,
  ) {}

  /**
   * Marks the machine seen now, by the database's clock (the one the sweeper compares with,
   * so an agent's skewed clock cannot flip it offline), then judges its state. Unknown
   * machines are ignored: they must register first. Resolves, with whether the machine is
   * known, once the beat's batch has committed (and its snapshot is on its way).
   */
  async recordHeartbeat(beat: MachineHeartbeat): Promise<boolean> {
    const known = await this.beats.add(beat);
    if (!known) this.logger.warn({ machineId: beat.machineId }, 'heartbeat from an unregistered machine ignored');
    return known;
  }

  /** Keeps the newest test result on the machine and, if it is heartbeating, judges it again. */
  async recordNetworkTest(result: MachineNetworkTested): Promise<void> {
    const test = { nats: result.nats, http: result.http, testedAt: result.testedAt };
    const moved = await this.machines.transaction(async (tx) => {
      const machine = await tx.recordNetworkTest(result.machineId, test);
      if (!machine) {
        this.logger.warn({ machineId: result.machineId }, 'network test of an unknown machine, or older than the one stored, ignored');
        return false;
      }
      return LIVE.includes(machine.state) && (await this.judge(tx, machine));
    });
    if (moved) this.relay.poke();
  }

  /** One transaction for a batch of beats; answers whether each beat's machine is known. */
  private async recordBatch(beats: MachineHeartbeat[]): Promise<boolean[]> {
    // A machine's newest beat stands for its others in the batch (a redelivery, a fast agent).
    const newest = new Map(beats.map((b) => [b.machineId, b]));
    let moved = false;
    const known = await this.machines.transaction(async (tx) => {
      const machines = await tx.recordHeartbeats(
        [...newest.values()].map((b) => ({ machineId: b.machineId, agentVersion: b.agentVersion ?? null })),
      );
      // pending: a join token exists but the agent has not registered; its beats only keep time.
      const verdicts = machines.filter((m) => m.state !== 'pending').map((m) => verdictOn(m));
      for (const v of verdicts) if (v?.reason) await tx.setStateReason(v.reason.machineId, v.reason.text);
      // One statement for the batch's moves: a fleet joining at once moves hundreds in a batch.
      moved = await this.move(
        tx,
        verdicts.flatMap((v) => (v?.move ? [v.move] : [])),
      );
      return new Set(machines.map((m) => m.id));
    });
    if (moved) this.relay.poke();
    // The batch's snapshots in one loop as it commits, so the client writes them to its socket in
    // one write whatever the handlers' awaits do (bench/agents README: writev 18% of the
    // scheduler's busy samples); a machine's newest beat of the batch stands for its others.
    for (const b of newest.values()) {
      if (!known.has(b.machineId)) continue;
      observeHeartbeat(b.machineId);
      this.snapshots.put(b);
    }
    return beats.map((b) => known.has(b.machineId));
  }

  /** A live machine judged again (a network test): moved or its reason kept true. Returns whether it moved. */
  private async judge(tx: MachinesRepository, machine: MachineForAdmission): Promise<boolean> {
    const verdict = verdictOn(machine);
    if (verdict?.reason) await tx.setStateReason(machine.id, verdict.reason.text);
    return this.move(tx, verdict?.move ? [verdict.move] : []);
  }

  /** Makes the moves (each into the outbox, for the relay once committed); whether any was made. */
  private async move(tx: MachinesRepository, moves: MachineMove[]): Promise<boolean> {
    const made = new Set((await tx.moveStates(moves)).map((m) => m.machineId));
    for (const m of moves)
      if (made.has(m.machineId))
        this.logger.log(
          { machineId: m.machineId, from: m.from, to: m.to, reason: m.reason },
          `machine ${m.machineId}: ${m.from} → ${m.to}`,
        );
    return made.size > 0;
  }
}

/**
 * ready or unschedulable, by the pool's rules; from offline or registered, a heartbeat decides
 * too. A machine held unschedulable for another reason than before keeps its state, its reason
 * made true (no event).
 */
function verdictOn(machine: MachineForAdmission): { move?: MachineMove; reason?: { machineId: string; text: string } } | undefined {
  const verdict = admit(
    { gpus: machine.gpus, networkTest: machine.network?.test },
    { name: machine.pool, allowedGpuTypes: machine.allowedGpuTypes, minNetworkMbps: machine.minNetworkMbps },
  );
  const to: MachineState = verdict.schedulable ? 'ready' : 'unschedulable';
  if (to === machine.state) {
    return !verdict.schedulable && verdict.reason !== machine.stateReason
      ? { reason: { machineId: machine.id, text: verdict.reason } }
      : undefined;
  }
  return { move: { machineId: machine.id, from: machine.state, to, reason: verdict.schedulable ? readyReason(machine) : verdict.reason } };
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
