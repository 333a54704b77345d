import { Injectable, Logger } from '@nestjs/common';
import { DataSource, type QueryRunner } from 'typeorm';
import { type MachineHeartbeat, type MachineNetworkTested, type MachineState } from '#tern/contracts';
import { type MachineGpu, type MachineNetwork, queryRows } from '#tern/persistence';
import { admit } from './admission.js';
import { HeartbeatSnapshots } from './heartbeat-snapshots.js';
import { MachineTransitions } from './machine-transitions.js';

/** A machine row joined with its pool's rules, as the heartbeat and network-test updates return it. */
interface MachineWithPool {
  id: string;
  pool: string;
  state: MachineState;
  state_reason: string | null;
  gpus: MachineGpu[];
  network: MachineNetwork | null;
  allowed_gpu_types: string[];
  min_network_mbps: number | null;
}

const RETURNING = `m.id, m.pool, m.state, m.state_reason, m.gpus, m.network, p.allowed_gpu_types, p.min_network_mbps`;

/** States in which the machine is heartbeating, so admission decides between ready and unschedulable. */
const LIVE: readonly MachineState[] = ['ready', 'unschedulable'];

/**
 * The machine registry's reaction to what agents send: heartbeats keep machines alive and
 * bring them to ready (or unschedulable, when their pool's rules say so); network tests are
 * stored and re-judged at once. Offline detection is the OfflineSweeper's.
 */
@Injectable()
export class MachinesService {
  private readonly logger = new Logger('machines');

  constructor(
    private readonly dataSource: DataSource,
    private readonly transitions: MachineTransitions,
    private readonly snapshots: HeartbeatSnapshots,
  ) {}

  /**
   * Marks the machine seen now, by the database's clock (the one the sweeper compares with,
   * so an agent's skewed clock cannot flip it offline), then judges its state. Unknown
   * machines are ignored: they must register first. Returns whether the machine is known.
   */
  async recordHeartbeat(beat: MachineHeartbeat): Promise<boolean> {
    const known = await this.dataSource.transaction(async (m) => {
      const runner = m.queryRunner!;
      const [row] = await queryRows<MachineWithPool>(
        runner,
        `UPDATE machines m SET last_heartbeat_at = now(), agent_version = COALESCE($2, m.agent_version)
         FROM pools p WHERE m.id = $1 AND p.name = m.pool
         RETURNING ${RETURNING}`,
        [beat.machineId, beat.agentVersion ?? null],
      );
      if (!row) return false;
      // pending: a join token exists but the agent has not registered; its beats only keep time.
      if (row.state !== 'pending') await this.judge(runner, row);
      return true;
    });
    if (!known) {
      this.logger.warn({ machineId: beat.machineId }, 'heartbeat from an unregistered machine ignored');
      return false;
    }
    await this.snapshots.put(beat);
    return true;
  }

  /** Keeps the newest test result on the machine and, if it is heartbeating, judges it again. */
  async recordNetworkTest(result: MachineNetworkTested): Promise<void> {
    const test = { nats: result.nats, http: result.http, testedAt: result.testedAt };
    await this.dataSource.transaction(async (m) => {
      const runner = m.queryRunner!;
      const [row] = await queryRows<MachineWithPool>(
        runner,
        `UPDATE machines m SET network = jsonb_set(COALESCE(m.network, '{}'::jsonb), '{test}', $2::jsonb), updated_at = now()
         FROM pools p
         WHERE m.id = $1 AND p.name = m.pool
           AND (m.network->'test'->>'testedAt' IS NULL OR (m.network->'test'->>'testedAt')::timestamptz < $3::timestamptz)
         RETURNING ${RETURNING}`,
        [result.machineId, JSON.stringify(test), result.testedAt],
      );
      if (!row) {
        this.logger.warn({ machineId: result.machineId }, 'network test of an unknown machine, or older than the one stored, ignored');
        return;
      }
      if (LIVE.includes(row.state)) await this.judge(runner, row);
    });
  }

  /** ready or unschedulable, by the pool's rules; from offline or registered, a heartbeat decides too. */
  private async judge(runner: QueryRunner, row: MachineWithPool): Promise<void> {
    const verdict = admit(
      { gpus: row.gpus, networkTest: row.network?.test },
      { name: row.pool, allowedGpuTypes: row.allowed_gpu_types, minNetworkMbps: row.min_network_mbps },
    );
    const to: MachineState = verdict.schedulable ? 'ready' : 'unschedulable';
    if (to === row.state) {
      // Still unschedulable, but perhaps for another reason: keep the reason true, no event.
      if (!verdict.schedulable && verdict.reason !== row.state_reason) {
        await runner.query(`UPDATE machines SET state_reason = $2, updated_at = now() WHERE id = $1`, [row.id, verdict.reason]);
      }
      return;
    }
    const reason = verdict.schedulable ? readyReason(row) : verdict.reason;
    const moved = await this.transitions.move(runner, row.id, row.state, to, reason);
    if (moved) this.logger.log({ machineId: row.id, from: row.state, to, reason }, `machine ${row.id}: ${row.state} → ${to}`);
  }
}

function readyReason(row: MachineWithPool): string {
  switch (row.state) {
    case 'registered':
      return 'first heartbeat';
    case 'offline':
      return 'heartbeats resumed';
    default:
      return `meets the requirements of pool "${row.pool}"`;
  }
}
