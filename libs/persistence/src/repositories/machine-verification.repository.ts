import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { VerificationState } from '#tern/contracts';
import type { MachineGpu } from '../entities/machine.entity.js';
import { TransactionalRepository } from './transactional.repository.js';

/**
 * SET clauses for MachinesRepository.storeInventory, whose statement binds the new cpu_model to
 * $3, cpu_threads to $5, memory_bytes to $6 and gpus to $7: a claim that differs from the stored
 * one (the first registration included) is unproven, and due for a challenge now.
 */
export const INVENTORY_CHANGE_RESETS_VERIFICATION = `
  verification = CASE WHEN ${changed()} THEN 'unverified' ELSE verification END,
  verification_reason = CASE WHEN ${changed()} THEN 'inventory changed: to be challenged' ELSE verification_reason END,
  verification_due_at = CASE WHEN ${changed()} THEN now() ELSE verification_due_at END`;

function changed(): string {
  return `(cpu_model IS DISTINCT FROM $3 OR cpu_threads IS DISTINCT FROM $5 OR memory_bytes IS DISTINCT FROM $6::bigint OR gpus IS DISTINCT FROM $7::jsonb)`;
}

/** A machine's claims as the challenge was drawn from them. */
export interface ClaimedMachine {
  id: string;
  pool: string;
  cpuModel: string | null;
  cpuThreads: number | null;
  gpus: MachineGpu[];
  verification: VerificationState;
  /** When a challenge last decided its state; null before the first. */
  checkedAt: Date | null;
  /**
   * GPUs the control plane's own records put to work on it now: its unfinished containers' and
   * sandboxes' requests. A GPU's challenge shares the device with that work, so it waits.
   */
  gpusInUse: number;
}

/** GPUs requested by a machine's unfinished containers and sandboxes, from the control plane's rows. */
const GPUS_IN_USE = `
  (SELECT COALESCE(SUM((c.requested->>'gpuCount')::int), 0) FROM containers c
    WHERE c.machine_id = m.id AND c.state IN ('pending', 'scheduled', 'starting', 'running', 'stopping'))
  + (SELECT COALESCE(SUM((s.requested->>'gpuCount')::int), 0) FROM sandboxes s
    WHERE s.machine_id = m.id AND s.state IN ('placing', 'running'))`;

export interface VerificationCount {
  pool: string;
  verification: VerificationState;
  count: number;
}

/** Machines' verification (libs/proof): which are due for a challenge, and what the last one found. */
@Injectable()
export class MachineVerificationRepository extends TransactionalRepository {
  constructor(db: DataSource) {
    super(db);
  }

  /**
   * Up to `limit` heartbeating machines whose challenge is due, their due time moved `leaseMs`
   * ahead so no other scheduler replica takes them meanwhile (rows another holds are skipped).
   */
  claimDue(limit: number, leaseMs: number): Promise<ClaimedMachine[]> {
    return this.rows<ClaimedMachine>(
      `UPDATE machines m SET verification_due_at = now() + $2 * interval '1 millisecond'
       FROM (SELECT id FROM machines WHERE state IN ('ready', 'unschedulable') AND verification_due_at <= now()
             ORDER BY verification_due_at LIMIT $1 FOR UPDATE SKIP LOCKED) due
       WHERE m.id = due.id
       RETURNING m.id, m.pool, m.cpu_model AS "cpuModel", m.cpu_threads AS "cpuThreads", m.gpus, m.verification,
                 m.verification_checked_at AS "checkedAt", (${GPUS_IN_USE})::int AS "gpusInUse"`,
      [limit, leaseMs],
    );
  }

  /** The machine's challenge put off by `nextInMs`, its state and reason as they are. */
  async defer(id: string, nextInMs: number): Promise<void> {
    await this.rows(`UPDATE machines SET verification_due_at = now() + $2 * interval '1 millisecond' WHERE id = $1`, [id, nextInMs]);
  }

  /**
   * Stores a challenge's verdict and the next challenge's time, unless the machine's claims
   * changed while it ran (a new registration: its own challenge is due). Returns the state before,
   * or undefined when nothing was stored.
   */
  async record(
    claimed: ClaimedMachine,
    verdict: { state: VerificationState; reason: string },
    nextInMs: number,
  ): Promise<VerificationState | undefined> {
    const [row] = await this.rows<{ before: VerificationState }>(
      `UPDATE machines m SET verification = $5, verification_reason = $6, verification_checked_at = now(),
         verification_due_at = now() + $7 * interval '1 millisecond'
       FROM (SELECT id, verification FROM machines WHERE id = $1 FOR UPDATE) old
       WHERE m.id = old.id AND m.cpu_model IS NOT DISTINCT FROM $2 AND m.cpu_threads IS NOT DISTINCT FROM $3 AND m.gpus = $4::jsonb
       RETURNING old.verification AS before`,
      [claimed.id, claimed.cpuModel, claimed.cpuThreads, JSON.stringify(claimed.gpus), verdict.state, verdict.reason, nextInMs],
    );
    return row?.before;
  }

  /** Those of `ids` whose hardware passed its challenge (verification `verified`). */
  async verifiedAmong(ids: readonly string[]): Promise<Set<string>> {
    if (!ids.length) return new Set();
    const rows = await this.rows<{ id: string }>(`SELECT id FROM machines WHERE id = ANY($1::text[]) AND verification = 'verified'`, [ids]);
    return new Set(rows.map((r) => r.id));
  }

  /** Machines per pool and verification state, for tern_machine_verification. */
  async countByPoolAndVerification(): Promise<VerificationCount[]> {
    const rows = await this.rows<{ pool: string; verification: VerificationState; count: string }>(
      `SELECT pool, verification, count(*) AS count FROM machines GROUP BY pool, verification`,
    );
    return rows.map((r) => ({ ...r, count: Number(r.count) }));
  }
}
