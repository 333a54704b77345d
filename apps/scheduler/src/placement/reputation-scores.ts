import { Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { REPUTATION_BUCKET, REPUTATION_BUCKET_TTL_MS, type ReputationEntry } from '#tern/contracts';
import { KvMirror, Messaging } from '#tern/messaging';

/**
 * The current reputation of every machine: a mirror of the `reputation` KV bucket (the
 * reputation service puts a machine's entry whenever its score changes). `scores()` is
 * undefined until the bucket has given at least one entry, so the placer can fall back to the
 * reputation_scores table while the bucket is empty or unreachable.
 */
@Injectable()
export class ReputationScores implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('reputation-scores');
  private readonly mirror: KvMirror<number>;

  constructor(messaging: Messaging) {
    this.mirror = new KvMirror<number>({
      bucket: REPUTATION_BUCKET.name,
      open: () => messaging.kv({ name: REPUTATION_BUCKET.name, ttlMs: REPUTATION_BUCKET_TTL_MS }),
      logger: this.logger,
      decode: (_key, entry) => {
        const score = entry.json<ReputationEntry>()?.score;
        return typeof score === 'number' && score >= 0 && score <= 1 ? score : undefined;
      },
    });
  }

  onApplicationBootstrap() {
    this.mirror.start();
  }

  async onApplicationShutdown() {
    await this.mirror.stop();
  }

  /** Machine id → score, or undefined while the bucket has told nothing. */
  scores(): ReadonlyMap<string, number> | undefined {
    return this.mirror.size ? this.mirror.map() : undefined;
  }
}
