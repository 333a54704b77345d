import { Injectable, Logger } from '@nestjs/common';
import { type KV } from '@nats-io/kv';
import { REPUTATION_BUCKET, REPUTATION_BUCKET_TTL_MS, type ReputationEntry } from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import { ReputationRepository, type StoredScore } from '#tern/persistence';
import type { ReputationView } from '#tern/contracts';

/** A machine's reputation as the machines API shows it. */
export type { ReputationView } from '#tern/contracts';

const view = (s: StoredScore): ReputationView => ({
  score: s.score,
  components: s.components,
  observed: s.observed,
  standing: s.standing,
  computedAt: s.computedAt.toISOString(),
});

/**
 * Scores from the `reputation` KV bucket (current, what the scheduler uses), falling back to
 * the newest row of reputation_scores where the bucket has none; history from the table.
 */
@Injectable()
export class ReputationReader {
  private readonly logger = new Logger('reputation');

  constructor(
    private readonly messaging: Messaging,
    private readonly stored: ReputationRepository,
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
      for (const s of await this.stored.latestScores(missing)) found.set(s.machineId, view(s));
    }
    return found;
  }

  /** Stored scores of one machine, newest first. */
  async history(machineId: string, from: Date | undefined, limit: number): Promise<ReputationView[]> {
    return (await this.stored.history(machineId, from, limit)).map(view);
  }

  private open(): Promise<KV> {
    return this.messaging.kv({ name: REPUTATION_BUCKET.name, ttlMs: REPUTATION_BUCKET_TTL_MS });
  }
}
