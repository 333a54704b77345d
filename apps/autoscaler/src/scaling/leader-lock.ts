import { Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import type { KV } from '@nats-io/kv';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { AUTOSCALER_LEADER_BUCKET } from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import { Ticker } from '#tern/timing';

const LEASE_TTL_MS = 5000;
const RENEW_EVERY_MS = 1000;
const LEASE_KEY = 'leader';

/**
 * Only one autoscaler replica publishes scale commands: the one holding a lease in the
 * `autoscaler-leader` bucket. NATS 2.9 has only bucket-wide TTL, so the bucket is dedicated
 * with a 5 s TTL; the holder renews with update(revision) every second (a compare-and-set, so
 * two replicas can never both renew), the others try create() (succeeds only once the key has
 * lapsed or been released). Every replica keeps following deployments and loads, so a new
 * leader acts on its first tick.
 */
@Injectable()
export class LeaderLock implements OnApplicationBootstrap, OnApplicationShutdown {
  readonly id = `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  private readonly logger = new Logger('leader');
  private kv?: KV;
  private revision?: number;
  private renewedAt = 0;
  private readonly ticker = new Ticker({ name: 'lease renewal', everyMs: RENEW_EVERY_MS, logger: this.logger }, () => this.renew());

  constructor(private readonly messaging: Messaging) {}

  async onApplicationBootstrap() {
    this.kv = await this.messaging.kv({ name: AUTOSCALER_LEADER_BUCKET.name, ttlMs: LEASE_TTL_MS });
    await this.renew();
    this.ticker.start();
  }

  async onApplicationShutdown() {
    await this.ticker.stop();
    // Hand over at once instead of making the next replica wait for the lease to lapse.
    if (this.revision !== undefined) await this.kv?.delete(LEASE_KEY, { previousSeq: this.revision }).catch(() => undefined);
    this.revision = undefined;
  }

  /** Leading, and renewed recently enough that no other replica can have taken over. */
  isLeader(now = Date.now()): boolean {
    return this.revision !== undefined && now - this.renewedAt < LEASE_TTL_MS - RENEW_EVERY_MS;
  }

  private async renew() {
    if (!this.kv) return;
    const held = this.revision;
    const leading = held !== undefined;
    try {
      this.revision = leading ? await this.kv.update(LEASE_KEY, this.id, held) : await this.kv.create(LEASE_KEY, this.id);
      this.renewedAt = Date.now();
      if (!leading) this.logger.log({ replica: this.id }, 'leading: this replica publishes scale commands');
    } catch (e) {
      if (leading) this.logger.warn({ replica: this.id, err: (e as Error).message }, 'lost the autoscaler lease');
      this.revision = undefined;
    }
  }
}
