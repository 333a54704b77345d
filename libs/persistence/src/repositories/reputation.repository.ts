import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { type ReputationScore } from '../entities/reputation-score.entity.js';
import { TransactionalRepository } from './transactional.repository.js';

/** A score as it is kept: the newest row per machine is current, older ones its history. */
export type StoredScore = Pick<ReputationScore, 'machineId' | 'score' | 'components' | 'observed' | 'standing' | 'computedAt'>;

/**
 * The reputation service's working record of one machine (libs/reputation's MachineRecord, as
 * a document) with its heartbeat punctuality kept apart, so a heartbeat writes only that.
 */
export interface StoredMachineRecord {
  machineId: string;
  pool: string | null;
  /** Without `heartbeats`; left out when only the heartbeats are read or written. */
  record?: object;
  heartbeats: object | null;
  /** Whether record.transitions is not empty. */
  hasTransitions: boolean;
}

/** Records changed since a time, and the database's time of the read (the next read's `since`). */
export interface ChangedMachineRecords {
  records: StoredMachineRecord[];
  readAt: Date;
}

const RECORD_COLUMNS = `machine_id AS "machineId", pool, heartbeats, has_transitions AS "hasTransitions"`;

const SCORE_COLUMNS = `machine_id AS "machineId", score, components, observed, standing, computed_at AS "computedAt"`;

function score(r: StoredScore): StoredScore {
  return { ...r, score: Number(r.score), observed: Number(r.observed) };
}

/**
 * Every statement on reputation machine records and score history. Records are changed by any
 * replica of the reputation service: in transaction(), lockMachineRecords() then
 * writeMachineRecords(), so two replicas changing one machine take turns.
 */
@Injectable()
export class ReputationRepository extends TransactionalRepository {
  constructor(db: DataSource) {
    super(db);
  }

  /**
   * The newest stored score of each machine in `machineIds`, or of every machine when it is
   * left out. The one way any service reads "the current score" from the table.
   */
  async latestScores(machineIds?: readonly string[]): Promise<StoredScore[]> {
    const rows = await this.rows<StoredScore>(
      `SELECT DISTINCT ON (machine_id) ${SCORE_COLUMNS} FROM reputation_scores
       WHERE $1::text[] IS NULL OR machine_id = ANY($1::text[])
       ORDER BY machine_id, computed_at DESC`,
      [machineIds ?? null],
    );
    return rows.map(score);
  }

  /** Stored scores of one machine, newest first, from `from` on when given. */
  async history(machineId: string, from: Date | undefined, limit: number): Promise<StoredScore[]> {
    const rows = await this.rows<StoredScore>(
      `SELECT ${SCORE_COLUMNS} FROM reputation_scores
       WHERE machine_id = $1 AND ($2::timestamptz IS NULL OR computed_at >= $2::timestamptz)
       ORDER BY computed_at DESC LIMIT $3`,
      [machineId, from ?? null, limit],
    );
    return rows.map(score);
  }

  /** Appends one history row per score, all computed at `computedAt`. */
  async appendScores(scores: readonly Omit<StoredScore, 'computedAt'>[], computedAt: Date): Promise<void> {
    if (!scores.length) return;
    const at = computedAt.toISOString();
    await this.rows(
      `INSERT INTO reputation_scores (machine_id, score, components, observed, standing, computed_at)
       SELECT x.machine_id, x.score, x.components, x.observed, x.standing, x.computed_at FROM jsonb_to_recordset($1::jsonb)
         AS x(machine_id text, score double precision, components jsonb, observed double precision, standing text, computed_at timestamptz)`,
      [
        JSON.stringify(
          scores.map((s) => ({
            machine_id: s.machineId,
            score: s.score,
            components: s.components,
            observed: s.observed,
            standing: s.standing,
            computed_at: at,
          })),
        ),
      ],
    );
  }

  /**
   * Locks the records of `machineIds` until the transaction ends, creating empty ones for
   * machines without. The document itself is read for `withRecord` and for machines with no
   * transitions yet (their next beat starts their uptime); the others come with their heartbeats only.
   * Known machines first, in one statement: once a fleet has joined, every record exists, and an
   * insert that found them all cost a statement per flush and an index probe per beat.
   */
  async lockMachineRecords(machineIds: readonly string[], withRecord: readonly string[]): Promise<StoredMachineRecord[]> {
    if (!machineIds.length) return [];
    const lock = (ids: readonly string[]) =>
      this.rows<StoredMachineRecord & { record: object | null }>(
        `SELECT ${RECORD_COLUMNS}, CASE WHEN machine_id = ANY($2::text[]) OR NOT has_transitions THEN record END AS record
         FROM reputation_machines WHERE machine_id = ANY($1::text[]) ORDER BY machine_id FOR UPDATE`,
        [ids, withRecord],
      );
    const rows = await lock(machineIds);
    if (rows.length < new Set(machineIds).size) {
      const found = new Set(rows.map((r) => r.machineId));
      const missing = machineIds.filter((id) => !found.has(id));
      await this.rows(
        `INSERT INTO reputation_machines (machine_id, record) SELECT id, '{}'::jsonb FROM unnest($1::text[]) AS id ON CONFLICT (machine_id) DO NOTHING`,
        [missing],
      );
      rows.push(...(await lock(missing)));
      rows.sort((a, b) => (a.machineId < b.machineId ? -1 : a.machineId > b.machineId ? 1 : 0));
    }
    return rows.map(withoutNullRecord);
  }

  /** Stores changed records: the document where given, the heartbeats always. */
  async writeMachineRecords(records: readonly StoredMachineRecord[]): Promise<void> {
    if (!records.length) return;
    await this.rows(
      `UPDATE reputation_machines m SET pool = x.pool, heartbeats = x.heartbeats, has_transitions = x.has_transitions, heartbeat_at = now(),
         record = COALESCE(x.record, m.record), updated_at = CASE WHEN x.record IS NULL THEN m.updated_at ELSE now() END
       FROM jsonb_to_recordset($1::jsonb) AS x(machine_id text, pool text, record jsonb, heartbeats jsonb, has_transitions boolean)
       WHERE m.machine_id = x.machine_id`,
      [
        JSON.stringify(
          records.map((r) => ({
            machine_id: r.machineId,
            pool: r.pool,
            record: r.record ?? null,
            heartbeats: r.heartbeats,
            has_transitions: r.hasTransitions,
          })),
        ),
      ],
    );
  }

  /**
   * The arrival (epoch ms, by the service's clock) of the newest heartbeat stored for any machine:
   * when the service last heard and stored beats, so a replica starting knows how long nobody
   * heard them. Null before any beat.
   */
  async lastHeartbeatArrival(): Promise<number | null> {
    const [{ last }] = await this.rows<{ last: number | null }>(
      `SELECT max((heartbeats->>'lastArrival')::double precision) AS last FROM reputation_machines`,
    );
    return last === null ? null : Number(last);
  }

  /** One machine's stored record, if it has one. */
  async machineRecord(machineId: string): Promise<StoredMachineRecord | undefined> {
    const rows = await this.rows<StoredMachineRecord>(`SELECT ${RECORD_COLUMNS}, record FROM reputation_machines WHERE machine_id = $1`, [
      machineId,
    ]);
    return rows[0];
  }

  /**
   * Records whose document changed after `since` (every record when null), and those whose
   * heartbeats changed after `heartbeatsSince` (the same as `since` unless given; `false`: not
   * read for their heartbeats), the document only where it changed. Times are the database's, so
   * replicas on other hosts agree. Every machine's heartbeats change every period: a reader that
   * needs them less often than documents says so (the scorer's passes between its full ones).
   */
  async machineRecordsChangedSince(since: Date | null, heartbeatsSince: Date | null | false = since): Promise<ChangedMachineRecords> {
    const [{ readAt }] = await this.rows<{ readAt: Date }>(`SELECT now() AS "readAt"`);
    const rows = await this.rows<StoredMachineRecord & { record: object | null }>(
      `SELECT ${RECORD_COLUMNS}, CASE WHEN $1::timestamptz IS NULL OR updated_at > $1::timestamptz THEN record END AS record
       FROM reputation_machines WHERE $1::timestamptz IS NULL OR updated_at > $1::timestamptz
         OR ($3::boolean AND ($2::timestamptz IS NULL OR heartbeat_at > $2::timestamptz))`,
      [since, heartbeatsSince || null, heartbeatsSince !== false],
    );
    return { records: rows.map(withoutNullRecord), readAt };
  }
}

function withoutNullRecord({ record, ...rest }: StoredMachineRecord & { record: object | null }): StoredMachineRecord {
  return record === null ? rest : { ...rest, record };
}
