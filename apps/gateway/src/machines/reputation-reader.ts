import { Injectable, Logger } from '@nestjs/common';
import { type KV } from '@nats-io/kv';
import { DataSource } from 'typeorm';
import { REPUTATION_BUCKET, REPUTATION_BUCKET_TTL_MS, type ReputationEntry } from '#tern/contracts';
import { Messaging } from '#tern/messaging';

/** A machine's reputation as the machines API shows it. */
export interface ReputationView {
  /** 0 (unreliable) to 1; compared with min_reputation by placement. */
  score: number;
  /** The inputs, each 0 to 1 (see the README's formula). */
  components: Record<string, number>;
  computedAt: string;
}

interface ScoreRow {
  machine_id: string;
  score: number;
  components: Record<string, number>;
  computed_at: Date;
}

const view = (r: ScoreRow): ReputationView => ({ score: Number(r.score), components: r.components, computedAt: r.computed_at.toISOString() });

/**
 * Scores from the `reputation` KV bucket (current, what the scheduler uses), falling back to
 * the newest row of reputation_scores where the bucket has none; history from the table.
 */
@Injectable()
export class ReputationReader {
  private readonly logger = new Logger('reputation');

  constructor(
    private readonly messaging: Messaging,
    private readonly dataSource: DataSource,
  ) {}

  async current(machineIds: string[]): Promise<Map<string, ReputationView>> {
    const found = new Map<string, ReputationView>();
    if (!machineIds.length) return found;
    try {
      const kv = await this.open();
      await Promise.all(
        machineIds.map(async (id) => {
          const e = await kv.get(id);
          if (e && e.operation === 'PUT' && e.length > 0) found.set(id, e.json<ReputationEntry>());
        }),
      );
    } catch (e) {
      this.logger.warn(`reputation bucket unavailable, using stored scores: ${(e as Error).message}`);
    }
    const missing = machineIds.filter((id) => !found.has(id));
    if (missing.length) {
      const rows: ScoreRow[] = await this.dataSource.query(
        `SELECT DISTINCT ON (machine_id) machine_id, score, components, computed_at FROM reputation_scores WHERE machine_id = ANY($1::text[]) ORDER BY machine_id, computed_at DESC`,
        [missing],
      );
      for (const r of rows) found.set(r.machine_id, view(r));
    }
    return found;
  }

  /** Stored scores of one machine, newest first. */
  async history(machineId: string, from: Date | undefined, limit: number): Promise<ReputationView[]> {
    const rows: ScoreRow[] = await this.dataSource.query(
      `SELECT machine_id, score, components, computed_at FROM reputation_scores
       WHERE machine_id = $1 AND ($2::timestamptz IS NULL OR computed_at >= $2::timestamptz)
       ORDER BY computed_at DESC LIMIT $3`,
      [machineId, from ?? null, limit],
    );
    return rows.map(view);
  }

  private open(): Promise<KV> {
    return this.messaging.kv({ name: REPUTATION_BUCKET.name, ttlMs: REPUTATION_BUCKET_TTL_MS });
  }
}
