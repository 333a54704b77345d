import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { type MachineFaultKind } from '#tern/contracts';
import { TransactionalRepository } from './transactional.repository.js';

/** A fault waiting in machine_fault_outbox to be announced (id: a bigint, as text). */
export interface MachineFaultEntry {
  id: string;
  machineId: string;
  kind: MachineFaultKind;
  containerId: string;
  deploymentId: string;
  deploymentVersion: number;
  workspaceId: string;
  afterReady: boolean;
  reason: string;
  at: Date;
}

/**
 * A common table expression, to follow one named `failed` (containers just failed, RETURNING
 * `id, machine_id, ready_at, state_reason, deployment_version_id`), that writes a fault of
 * `kind` (an SQL expression; none when it is null) for each of them on a machine: the fault
 * enters the outbox in the statement that failed its container, so it is never lost between the two.
 */
export function faultsOfFailed(kind: string): string {
  return `faults AS (
    INSERT INTO machine_fault_outbox (machine_id, kind, container_id, deployment_id, deployment_version, workspace_id, after_ready, reason)
    SELECT f.machine_id, ${kind}, f.id, dv.deployment_id::text, dv.version, d.workspace_id::text, f.ready_at IS NOT NULL, f.state_reason
    FROM failed f JOIN deployment_versions dv ON dv.id = f.deployment_version_id JOIN deployments d ON d.id = dv.deployment_id
    WHERE f.machine_id IS NOT NULL AND ${kind} IS NOT NULL
    RETURNING id
  )`;
}

/**
 * The outbox of faults the scheduler saw on machines (written by ContainersRepository's
 * statements that fail containers, see faultsOfFailed), read and emptied by MachineFaultRelay.
 */
@Injectable()
export class MachineFaultsRepository extends TransactionalRepository {
  constructor(db: DataSource) {
    super(db);
  }

  /**
   * The oldest `limit` faults waiting to be announced, locked until the transaction ends; rows
   * another relay holds are skipped, so replicas share the outbox without announcing a fault twice
   * at once (order does not matter: each fault stands alone).
   */
  claim(limit: number): Promise<MachineFaultEntry[]> {
    return this.rows<MachineFaultEntry>(
      `SELECT id::text, machine_id AS "machineId", kind, container_id AS "containerId", deployment_id AS "deploymentId",
              deployment_version AS "deploymentVersion", workspace_id AS "workspaceId", after_ready AS "afterReady", reason, at
       FROM machine_fault_outbox ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED`,
      [limit],
    );
  }

  /** Removes announced faults from the outbox. */
  async remove(ids: readonly string[]): Promise<void> {
    if (ids.length) await this.rows(`DELETE FROM machine_fault_outbox WHERE id = ANY($1::bigint[])`, [ids]);
  }
}
