import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { type ReputationScore } from '../entities/reputation-score.entity.js';
import { queryRowsOn } from '../query-rows.js';

/** A score as it is kept: the newest row per machine is current, older ones its history. */
export type StoredScore = Pick<ReputationScore, 'machineId' | 'score' | 'components' | 'computedAt'>;

/** The reputation service's working record of one machine (libs/reputation's MachineRecord, as a document). */
export interface StoredMachineRecord {
  machineId: string;
  pool: string | null;
  record: object;
}

const SCORE_COLUMNS = `machine_id AS "machineId", score, components, computed_at AS "computedAt"`;

function score(r: StoredScore): StoredScore {
  return { ...r, score: Number(r.score) };
}

/** Every statement on reputation machine records and score history. */
@Injectable()
export class ReputationRepository {
  constructor(private readonly db: DataSource) {}

  /**
   * The newest stored score of each machine in `machineIds`, or of every machine when it is
   * left out. The one way any service reads "the current score" from the table.
   */
  async latestScores(machineIds?: readonly string[]): Promise<StoredScore[]> {
    const rows = await queryRowsOn<StoredScore>(
      this.db,
      `SELECT DISTINCT ON (machine_id) ${SCORE_COLUMNS} FROM reputation_scores
       WHERE $1::text[] IS NULL OR machine_id = ANY($1::text[])
       ORDER BY machine_id, computed_at DESC`,
      [machineIds ?? null],
    );
    return rows.map(score);
  }

  /** Stored scores of one machine, newest first, from `from` on when given. */
  async history(machineId: string, from: Date | undefined, limit: number): Promise<StoredScore[]> {
    const rows = await queryRowsOn<StoredScore>(
      this.db,
      `SELECT ${SCORE_COLUMNS} FROM reputation_scores
       WHERE machine_id = $1 AND ($2::timestamptz IS NULL OR computed_at >= $2::timestamptz)
       ORDER BY computed_at DESC LIMIT $3`,
      [machineId, from ?? null, limit],
    );
    return rows.map(score);
  }

  /** Appends one history row per score, all computed at `computedAt`. */
  async appendScores(
    scores: readonly { machineId: string; score: number; components: Record<string, number> }[],
    computedAt: Date,
  ): Promise<void> {
    if (!scores.length) return;
    const at = computedAt.toISOString();
    await queryRowsOn(
      this.db,
      `INSERT INTO reputation_scores (machine_id, score, components, computed_at)
       SELECT x.machine_id, x.score, x.components, x.computed_at FROM jsonb_to_recordset($1::jsonb) AS x(machine_id text, score double precision, components jsonb, computed_at timestamptz)`,
      [JSON.stringify(scores.map((s) => ({ machine_id: s.machineId, score: s.score, components: s.components, computed_at: at })))],
    );
  }

  /** Every machine's stored record. */
  machineRecords(): Promise<StoredMachineRecord[]> {
    return queryRowsOn<StoredMachineRecord>(this.db, `SELECT machine_id AS "machineId", pool, record FROM reputation_machines`);
  }

  /** Inserts or replaces the records, in one statement. */
  async saveMachineRecords(records: readonly StoredMachineRecord[]): Promise<void> {
    if (!records.length) return;
    await queryRowsOn(
      this.db,
      `INSERT INTO reputation_machines (machine_id, pool, record, updated_at)
       SELECT x.machine_id, x.pool, x.record, now() FROM jsonb_to_recordset($1::jsonb) AS x(machine_id text, pool text, record jsonb)
       ON CONFLICT (machine_id) DO UPDATE SET pool = EXCLUDED.pool, record = EXCLUDED.record, updated_at = now()`,
      [JSON.stringify(records.map((r) => ({ machine_id: r.machineId, pool: r.pool, record: r.record })))],
    );
  }
}
