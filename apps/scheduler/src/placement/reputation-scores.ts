import { Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import type { KvWatchEntry } from '@nats-io/kv';
import type { QueuedIterator } from '@nats-io/transport-node';
import { REPUTATION_BUCKET, REPUTATION_BUCKET_TTL_MS, type ReputationEntry } from '#tern/contracts';
import { Messaging } from '#tern/messaging';

/**
 * The current reputation of every machine, followed from the `reputation` KV bucket (the
 * reputation service puts a machine's entry whenever its score changes). `scores()` is
 * undefined until the bucket has given at least one entry, so the placer can fall back to the
 * reputation_scores table while the bucket is empty or unreachable.
 */
@Injectable()
export class ReputationScores implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('reputation-scores');
  private readonly byMachine = new Map<string, number>();
  private watcher?: QueuedIterator<KvWatchEntry>;
  private stopped = false;

  constructor(private readonly messaging: Messaging) {}

  async onApplicationBootstrap() {
    void this.follow();
  }

  async onApplicationShutdown() {
    this.stopped = true;
    this.watcher?.stop();
  }

  /** Machine id → score, or undefined while the bucket has told nothing. */
  scores(): ReadonlyMap<string, number> | undefined {
    return this.byMachine.size ? this.byMachine : undefined;
  }

  /** Watches the bucket; reopens it after a failure (NATS away, bucket deleted) every few seconds. */
  private async follow() {
    while (!this.stopped) {
      try {
        const kv = await this.messaging.kv({ name: REPUTATION_BUCKET.name, ttlMs: REPUTATION_BUCKET_TTL_MS });
        this.watcher = await kv.watch();
        for await (const e of this.watcher) this.apply(e);
      } catch (err) {
        if (!this.stopped) this.logger.warn(`reputation watch ended: ${(err as Error).message}`);
      }
      if (!this.stopped) await new Promise((r) => setTimeout(r, 2000));
    }
  }

  private apply(e: KvWatchEntry) {
    if (e.operation !== 'PUT') {
      this.byMachine.delete(e.key);
      return;
    }
    try {
      const entry = e.json<ReputationEntry>();
      if (typeof entry?.score === 'number' && entry.score >= 0 && entry.score <= 1) this.byMachine.set(e.key, entry.score);
    } catch {
      this.logger.warn({ key: e.key }, 'ignored a reputation entry that is not JSON');
    }
  }
}
