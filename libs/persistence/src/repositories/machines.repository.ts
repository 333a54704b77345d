import { Injectable } from '@nestjs/common';
import { INVENTORY_CHANGE_RESETS_VERIFICATION } from './machine-verification.repository.js';
import { TransactionalRepository } from './transactional.repository.js';
import { DataSource } from 'typeorm';
import type { MachineState } from '#tern/contracts';
import {
  type MachineDisk,
  type MachineGpu,
  Machine,
  type MachineNetwork,
  type MachineNetworkInterface,
  type MachineNetworkTest,
  type MachineOs,
} from '../entities/machine.entity.js';
import { Pool } from '../entities/pool.entity.js';
/** A pool's admission rules, as created or changed by an admin. */
export type PoolRules = Pick<Pool, 'name' | 'allowedGpuTypes' | 'minNetworkMbps' | 'minReputation'>;

/** How many machines of a pool are in one state. */
export interface PoolMachineCount {
  pool: string;
  state: MachineState;
  count: number;
}

/** A state a machine entered (machine_state_changes, written by a trigger on machines.state). */
export interface MachineStateChange {
  at: Date;
  from: MachineState | null;
  to: MachineState;
  reason: string | null;
}

/** A machine moved offline by the sweep: what its machine.state-changed event needs. */
export interface OfflineMachine {
  id: string;
  pool: string;
  from: MachineState;
  reason: string;
  changedAt: Date;
}

/** A state change a caller asks for: made only if the machine is still in `from`. */
export interface MachineMove {
  machineId: string;
  from: MachineState;
  to: MachineState;
  reason: string;
}

/** A committed move waiting in machine_state_outbox to be announced (id: a bigint, as text). */
export interface StateOutboxEntry {
  id: string;
  machineId: string;
  pool: string;
  from: MachineState | null;
  to: MachineState;
  reason: string;
  changedAt: Date;
}

/** A machine with its pool's rules, as the heartbeat and network-test updates return it for admission. */
export interface MachineForAdmission {
  id: string;
  pool: string;
  state: MachineState;
  stateReason: string | null;
  gpus: MachineGpu[];
  network: MachineNetwork | null;
  allowedGpuTypes: string[];
  minNetworkMbps: number | null;
}

/** The registration body's inventory as the machine row keeps it (GPU memory in bytes, like every size there). */
export interface MachineInventoryColumns {
  hostname: string;
  cpuModel: string;
  cpuCores: number;
  cpuThreads: number;
  memoryBytes: number;
  gpus: MachineGpu[];
  disks: MachineDisk[];
  os: MachineOs;
  interfaces: MachineNetworkInterface[];
}

/** A join token's use and expiry, with the database's clock to judge them by. */
export interface JoinTokenStatus {
  usedAt: Date | null;
  expiresAt: Date | null;
  now: Date;
}

const ADMISSION_RETURNING = `m.id, m.pool, m.state, m.state_reason AS "stateReason", m.gpus, m.network,
  p.allowed_gpu_types AS "allowedGpuTypes", p.min_network_mbps AS "minNetworkMbps"`;

/** Machines one sweep moves at most; a sweep that moved this many is followed by another at once. */
export const OFFLINE_SWEEP_BATCH = 500;

/**
 * One statement finds and moves every machine that has been silent for longer than the TTL.
 * Rows are claimed with FOR UPDATE SKIP LOCKED and re-checked by the UPDATE, so with several
 * scheduler replicas each machine is moved, and its move written to the outbox, by exactly one of them; a machine
 * whose heartbeat is being recorded right now (row locked) is left for the next sweep.
 * A registered machine that never sends a first heartbeat goes offline the same way.
 */
const SWEEP = `
  WITH stale AS (
    SELECT id, state FROM machines
    WHERE state IN ('registered', 'ready', 'unschedulable')
      AND (last_heartbeat_at < now() - make_interval(secs => $1::int)
           OR (last_heartbeat_at IS NULL AND COALESCE(registered_at, state_changed_at) < now() - make_interval(secs => $1::int)))
    ORDER BY id
    LIMIT ${OFFLINE_SWEEP_BATCH}
    FOR UPDATE SKIP LOCKED
  ), swept AS (
    UPDATE machines m
    SET state = 'offline',
        state_reason = CASE
          WHEN m.last_heartbeat_at IS NULL THEN format('no heartbeat within %s s of registering', $1::int)
          ELSE format('no heartbeat for %s s (last at %s)', $1::int, to_char(m.last_heartbeat_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'))
        END,
        state_changed_at = now(),
        updated_at = now()
    FROM stale
    WHERE m.id = stale.id AND m.state = stale.state
    RETURNING m.id, m.pool, stale.state AS "from", m.state_reason AS reason, m.state_changed_at AS "changedAt"
  ), announced AS (
    INSERT INTO machine_state_outbox (machine_id, pool, from_state, to_state, reason, changed_at)
    SELECT id, pool, "from", 'offline', reason, "changedAt" FROM swept ORDER BY id
  )
  SELECT * FROM swept`;

/** Every statement on machines and pools (registration, credentials, state, offers). */
@Injectable()
export class MachinesRepository extends TransactionalRepository {
  constructor(db: DataSource) {
    super(db);
  }

  /** Every pool, by name. */
  listPools(): Promise<Pool[]> {
    return this.db.getRepository(Pool).find({ order: { name: 'ASC' } });
  }

  findPool(name: string): Promise<Pool | null> {
    return this.db.getRepository(Pool).findOneBy({ name });
  }

  /** Rejects a taken name with the unique violation uq_pools_name. */
  createPool(rules: PoolRules): Promise<Pool> {
    const pools = this.db.getRepository(Pool);
    return pools.save(pools.create(rules));
  }

  /** Writes a pool's changed rules. */
  savePool(pool: Pool): Promise<Pool> {
    return this.db.getRepository(Pool).save(pool);
  }

  /**
   * What still names the pool: its machines (any state, pending joins included), the deployments
   * whose latest version places there, and its live sandboxes.
   */
  async poolUsers(name: string): Promise<{ machines: number; deployments: string[]; sandboxes: number }> {
    const [row] = await this.rows<{ machines: number; deployments: string[] | null; sandboxes: number }>(
      `SELECT (SELECT count(*)::int FROM machines WHERE pool = $1) AS machines,
              (SELECT array_agg(DISTINCT d.name ORDER BY d.name)
                 FROM deployments d JOIN deployment_versions v ON v.deployment_id = d.id AND v.version = d.latest_version
                WHERE d.state <> 'deleted' AND v.spec->>'pool' = $1) AS deployments,
              (SELECT count(*)::int FROM sandboxes WHERE pool = $1 AND state IN ('placing', 'running')) AS sandboxes`,
      [name],
    );
    return { machines: row!.machines, deployments: row!.deployments ?? [], sandboxes: row!.sandboxes };
  }

  /** False when there was no such pool. A machine joining meanwhile fails it with fk_machines_pool. */
  async deletePool(name: string): Promise<boolean> {
    const result = await this.db.getRepository(Pool).delete({ name });
    return !!result.affected;
  }

  /** The states the machine entered (since `from`), newest first, at most `limit`. */
  stateChanges(machineId: string, from: Date | undefined, limit: number): Promise<MachineStateChange[]> {
    return this.rows<MachineStateChange>(
      `SELECT at, from_state AS "from", to_state AS "to", reason FROM machine_state_changes WHERE machine_id = $1 AND ($2::timestamptz IS NULL OR at >= $2)
       ORDER BY at DESC, id DESC LIMIT $3`,
      [machineId, from?.toISOString() ?? null, limit],
    );
  }

  /** Machines per pool and state (one pool's, or every pool's). */
  countMachinesByPoolAndState(pool?: string): Promise<PoolMachineCount[]> {
    const query = this.db
      .getRepository(Machine)
      .createQueryBuilder('m')
      .select('m.pool', 'pool')
      .addSelect('m.state', 'state')
      .addSelect('count(*)::int', 'count')
      .groupBy('m.pool')
      .addGroupBy('m.state');
    if (pool) query.where('m.pool = :pool', { pool });
    return query.getRawMany<PoolMachineCount>();
  }

  /** Every machine's pool and GPUs: what the cluster could ever offer a deployment. */
  gpuOffers(): Promise<Pick<Machine, 'pool' | 'gpus'>[]> {
    return this.db.getRepository(Machine).find({ select: { pool: true, gpus: true } });
  }

  private get machines() {
    return (this.manager ?? this.db.manager).getRepository(Machine);
  }

  // --- The machines API ---------------------------------------------------------------------

  /** A pending machine with its join token's hash; rejects with pk_machines when the id is taken. */
  async createPending(machine: { id: string; pool: string; joinTokenHash: string; joinTokenExpiresAt: Date }): Promise<void> {
    await this.machines.insert({ ...machine, state: 'pending' });
  }

  /** Machines by pool then id, optionally of one pool or one state. */
  list(filter: { pool?: string; state?: MachineState } = {}): Promise<Machine[]> {
    return this.machines.find({
      where: { ...(filter.pool ? { pool: filter.pool } : {}), ...(filter.state ? { state: filter.state } : {}) },
      order: { pool: 'ASC', id: 'ASC' },
    });
  }

  findById(id: string): Promise<Machine | null> {
    return this.machines.findOneBy({ id });
  }

  findByJoinTokenHash(hash: string): Promise<Machine | null> {
    return this.machines.findOneBy({ joinTokenHash: hash });
  }

  findByCredentialHash(hash: string): Promise<Machine | null> {
    return this.machines.findOneBy({ credentialHash: hash });
  }

  /** Deletes the machine (its tokens with it); false when there was none. */
  async remove(id: string): Promise<boolean> {
    const result = await this.machines.delete({ id });
    return !!result.affected;
  }

  /**
   * Takes the machine's credential away (its machine token stops working) and returns its NATS key to revoke: null when it has none,
   * undefined when there is no such machine.
   */
  async revokeCredential(id: string): Promise<string | null | undefined> {
    const [row] = await this.rows<{ key: string | null }>(
      `UPDATE machines SET credential_hash = NULL, updated_at = now() WHERE id = $1 RETURNING nats_public_key AS key`,
      [id],
    );
    return row ? row.key : undefined;
  }

  // --- Registration -------------------------------------------------------------------------

  /** Records the public key of the machine's NATS user; returns the key it replaces, if another. */
  async replaceNatsPublicKey(id: string, key: string): Promise<string | undefined> {
    const [row] = await this.rows<{ previous: string | null }>(
      `UPDATE machines m SET nats_public_key = $2
         FROM (SELECT nats_public_key AS previous FROM machines WHERE id = $1 FOR UPDATE) o
       WHERE m.id = $1 RETURNING o.previous`,
      [id, key],
    );
    return row?.previous && row.previous !== key ? row.previous : undefined;
  }

  /**
   * The join token's one use: sets the machine's credential if the token is unused and
   * unexpired. A concurrent second redemption finds join_token_used_at set and gets false.
   */
  async redeemJoinToken(machineId: string, credentialHash: string): Promise<boolean> {
    const claimed = await this.rows(
      `UPDATE machines SET join_token_used_at = now(), credential_hash = $2
       WHERE id = $1 AND join_token_used_at IS NULL AND join_token_expires_at > now() RETURNING id`,
      [machineId, credentialHash],
    );
    return claimed.length > 0;
  }

  /** Undefined when the machine does not exist. */
  async joinTokenStatus(machineId: string): Promise<JoinTokenStatus | undefined> {
    const [row] = await this.rows<JoinTokenStatus>(
      `SELECT join_token_used_at AS "usedAt", join_token_expires_at AS "expiresAt", now() AS now FROM machines WHERE id = $1`,
      [machineId],
    );
    return row;
  }

  /**
   * Creates the machine (pending) with a credential; false when a machine with this id exists,
   * whose credential is never replaced this way (only its own join or machine token can).
   */
  async insertWithCredential(machineId: string, pool: string, credentialHash: string): Promise<boolean> {
    const rows = await this.rows<{ id: string }>(
      `INSERT INTO machines (id, pool, state, credential_hash) VALUES ($1, $2, 'pending', $3)
       ON CONFLICT (id) DO NOTHING
       RETURNING id`,
      [machineId, pool, credentialHash],
    );
    return rows.length > 0;
  }

  /**
   * Replaces a registered machine's credential (token rotation); with `currentHash`, only while
   * that is still its credential, so two rotations racing with the same token cannot both win.
   * False when the machine is unknown, has no credential yet (its join token is unused), or
   * its credential changed meanwhile.
   */
  async replaceCredential(machineId: string, credentialHash: string, currentHash?: string): Promise<boolean> {
    const rows = await this.rows<{ id: string }>(
      `UPDATE machines SET credential_hash = $2
       WHERE id = $1 AND credential_hash IS NOT NULL AND ($3::text IS NULL OR credential_hash = $3)
       RETURNING id`,
      [machineId, credentialHash, currentHash ?? null],
    );
    return rows.length > 0;
  }

  /** Ids of the machines that ran (or run) a container of one of the workspace's deployments. */
  async idsUsedByWorkspace(workspaceId: string): Promise<string[]> {
    const rows = await this.rows<{ machineId: string }>(
      `SELECT DISTINCT c.machine_id AS "machineId"
         FROM containers c
         JOIN deployment_versions v ON v.id = c.deployment_version_id
         JOIN deployments d ON d.id = v.deployment_id
        WHERE d.workspace_id = $1 AND c.machine_id IS NOT NULL`,
      [workspaceId],
    );
    return rows.map((r) => r.machineId);
  }

  /** The machine's state, its row locked until the transaction ends (use inside transaction()). */
  async lockState(machineId: string): Promise<MachineState | undefined> {
    const [row] = await this.rows<{ state: MachineState }>(`SELECT state FROM machines WHERE id = $1 FOR UPDATE`, [machineId]);
    return row?.state;
  }

  /**
   * Stores the inventory and marks the machine registered now; undefined when it does not exist.
   * A changed CPU, memory or GPU claim makes the machine unverified and due for a challenge at once.
   */
  async storeInventory(
    machineId: string,
    inv: MachineInventoryColumns,
    agentVersion: string,
  ): Promise<{ pool: string; registeredAt: Date } | undefined> {
    const [row] = await this.rows<{ pool: string; registeredAt: Date }>(
      `UPDATE machines SET
         hostname = $2, cpu_model = $3, cpu_cores = $4, cpu_threads = $5, memory_bytes = $6,
         gpus = $7::jsonb, disks = $8::jsonb, os = $9::jsonb,
         network = jsonb_set(COALESCE(network, '{}'::jsonb), '{interfaces}', $10::jsonb),
         agent_version = $11, registered_at = now(), updated_at = now(),
         ${INVENTORY_CHANGE_RESETS_VERIFICATION}
       WHERE id = $1 RETURNING pool, registered_at AS "registeredAt"`,
      [
        machineId,
        inv.hostname,
        inv.cpuModel,
        inv.cpuCores,
        inv.cpuThreads,
        inv.memoryBytes,
        JSON.stringify(inv.gpus),
        JSON.stringify(inv.disks),
        JSON.stringify(inv.os),
        JSON.stringify(inv.interfaces),
        agentVersion,
      ],
    );
    return row;
  }

  /** Moves the machine to registered, whatever its state (the caller decided, holding its row lock); when it moved. */
  async markRegistered(machineId: string, reason: string): Promise<Date | undefined> {
    const [row] = await this.rows<{ changedAt: Date }>(
      `UPDATE machines SET state = 'registered', state_reason = $2, state_changed_at = now() WHERE id = $1 RETURNING state_changed_at AS "changedAt"`,
      [machineId, reason],
    );
    return row?.changedAt;
  }

  // --- The scheduler's registry -------------------------------------------------------------

  /**
   * Marks the machines seen now, by the database's clock (the one the sweep compares with, so an
   * agent's skewed clock cannot flip it offline), and keeps their agent versions: one UPDATE for
   * the batch, the rows locked in id order first so two replicas' batches sharing machines never
   * deadlock. Returns the known machines, unknown ones left out (use inside transaction()).
   */
  async recordHeartbeats(beats: readonly { machineId: string; agentVersion: string | null }[]): Promise<MachineForAdmission[]> {
    const ids = beats.map((b) => b.machineId);
    await this.rows(`SELECT id FROM machines WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE`, [ids]);
    return this.rows<MachineForAdmission>(
      `UPDATE machines m SET last_heartbeat_at = now(), agent_version = COALESCE(b.agent_version, m.agent_version)
       FROM unnest($1::text[], $2::text[]) AS b(id, agent_version), pools p
       WHERE m.id = b.id AND p.name = m.pool
       RETURNING ${ADMISSION_RETURNING}`,
      [ids, beats.map((b) => b.agentVersion)],
    );
  }

  /** Keeps the test on the machine unless a newer one is stored; undefined when nothing changed (unknown machine, older test). */
  async recordNetworkTest(machineId: string, test: MachineNetworkTest): Promise<MachineForAdmission | undefined> {
    const [row] = await this.rows<MachineForAdmission>(
      `UPDATE machines m SET network = jsonb_set(COALESCE(m.network, '{}'::jsonb), '{test}', $2::jsonb), updated_at = now()
       FROM pools p
       WHERE m.id = $1 AND p.name = m.pool
         AND (m.network->'test'->>'testedAt' IS NULL OR (m.network->'test'->>'testedAt')::timestamptz < $3::timestamptz)
       RETURNING ${ADMISSION_RETURNING}`,
      [machineId, JSON.stringify(test), test.testedAt],
    );
    return row;
  }

  /** A new reason for the state the machine is in (no state change, so no event). */
  async setStateReason(machineId: string, reason: string): Promise<void> {
    await this.rows(`UPDATE machines SET state_reason = $2, updated_at = now() WHERE id = $1`, [machineId, reason]);
  }

  /**
   * Moves the machine from `from` to `to` only if it is still in `from`, and writes the move to
   * the outbox for MachineStateRelay to announce once committed; undefined when it was not.
   */
  async moveState(
    machineId: string,
    from: MachineState,
    to: MachineState,
    reason: string,
  ): Promise<{ pool: string; changedAt: Date } | undefined> {
    const [moved] = await this.moveStates([{ machineId, from, to, reason }]);
    return moved && { pool: moved.pool, changedAt: moved.changedAt };
  }

  /** moveState for many machines in one statement; returns those that moved. */
  moveStates(moves: readonly MachineMove[]): Promise<{ machineId: string; pool: string; changedAt: Date }[]> {
    if (!moves.length) return Promise.resolve([]);
    return this.rows(
      `WITH wanted AS (
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS w(id, from_state, to_state, reason)
       ), moved AS (
         UPDATE machines m SET state = w.to_state, state_reason = w.reason, state_changed_at = now(), updated_at = now()
         FROM wanted w WHERE m.id = w.id AND m.state = w.from_state
         RETURNING m.id, m.pool, w.from_state, w.to_state, w.reason, m.state_changed_at
       ), announced AS (
         INSERT INTO machine_state_outbox (machine_id, pool, from_state, to_state, reason, changed_at)
         SELECT id, pool, from_state, to_state, reason, state_changed_at FROM moved ORDER BY id
       )
       SELECT id AS "machineId", pool, state_changed_at AS "changedAt" FROM moved`,
      [moves.map((m) => m.machineId), moves.map((m) => m.from), moves.map((m) => m.to), moves.map((m) => m.reason)],
    );
  }

  /**
   * Moves up to OFFLINE_SWEEP_BATCH machines silent for longer than `ttlSeconds` offline, each exactly once
   * across replicas (see SWEEP); the same statement writes the moves to the outbox, which
   * MachineStateRelay announces once committed.
   */
  markOfflineOlderThan(ttlSeconds: number): Promise<OfflineMachine[]> {
    return this.rows<OfflineMachine>(SWEEP, [ttlSeconds]);
  }

  // --- The outbox of state changes ------------------------------------------------------------

  /**
   * The oldest `limit` moves waiting to be announced, in the order they were written, or none when
   * another relay holds the outbox (inside transaction(): the claim lasts until it ends). One relay
   * at a time keeps each machine's moves announced in order. The lock's key names the schema, as
   * advisory locks are per database.
   */
  async claimStateOutbox(limit: number): Promise<StateOutboxEntry[]> {
    const [{ claimed }] = await this.rows<{ claimed: boolean }>(
      `SELECT pg_try_advisory_xact_lock(hashtextextended(current_schema() || '.machine_state_outbox', 0)) AS claimed`,
    );
    if (!claimed) return [];
    return this.rows<StateOutboxEntry>(
      `SELECT id::text, machine_id AS "machineId", pool, from_state AS "from", to_state AS "to", reason, changed_at AS "changedAt"
       FROM machine_state_outbox ORDER BY id LIMIT $1`,
      [limit],
    );
  }

  /** Removes announced moves from the outbox. */
  async deleteStateOutbox(ids: readonly string[]): Promise<void> {
    if (ids.length) await this.rows(`DELETE FROM machine_state_outbox WHERE id = ANY($1::bigint[])`, [ids]);
  }
}
