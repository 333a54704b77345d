import { Logger } from '@nestjs/common';
import type { KV } from '@nats-io/kv';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { type BucketSpec } from '#tern/contracts';
import { Ticker } from '#tern/timing';
import { type Messaging } from './messaging.js';

/** A dead holder's lease lapses after this long (the bucket's TTL). */
export const LEASE_TTL_MS = 5000;
/** The holder renews this often; the others try to take it as often. */
export const LEASE_RENEW_MS = 1000;
/** The key the holder's replica id is written under. */
export const LEASE_KEY = 'leader';

/**
 * One replica of a service at a time holds the lease in a dedicated KV bucket, for work that
 * must not be done twice. NATS 2.9 has only bucket-wide TTL, so the bucket is the lease's own,
 * with a 5 s TTL; the holder renews with update(revision) every second (a compare-and-set, so
 * two replicas can never both renew), the others try create() (succeeds only once the key has
 * lapsed or been released). After a kill -9 of the holder another replica holds it within
 * LEASE_TTL_MS + LEASE_RENEW_MS; a holder that stops releases it at once.
 */
export class Lease {
  readonly replica = `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  private readonly logger: Logger;
  private kv?: KV;
  private revision?: number;
  private renewedAt = 0;
  private readonly ticker: Ticker;

  /** @param duty what the holder does, for the log ("publishes scale commands"). */
  constructor(
    private readonly messaging: Messaging,
    private readonly bucket: BucketSpec,
    private readonly duty: string,
  ) {
    this.logger = new Logger(`lease:${bucket.name}`);
    this.ticker = new Ticker({ name: 'lease renewal', everyMs: LEASE_RENEW_MS, logger: this.logger }, () => this.renew());
  }

  async start(): Promise<void> {
    this.kv = await this.messaging.kv({ name: this.bucket.name, ttlMs: LEASE_TTL_MS });
    await this.renew();
    this.ticker.start();
  }

  async stop(): Promise<void> {
    await this.ticker.stop();
    // Hand over at once instead of making the next replica wait for the lease to lapse.
    if (this.revision !== undefined) await this.kv?.delete(LEASE_KEY, { previousSeq: this.revision }).catch(() => undefined);
    this.revision = undefined;
  }

  /** Holding, and renewed recently enough that no other replica can have taken over. */
  held(now = Date.now()): boolean {
    return this.revision !== undefined && now - this.renewedAt < LEASE_TTL_MS - LEASE_RENEW_MS;
  }

  private async renew() {
    if (!this.kv) return;
    const held = this.revision;
    const holding = held !== undefined;
    try {
      this.revision = holding ? await this.kv.update(LEASE_KEY, this.replica, held) : await this.kv.create(LEASE_KEY, this.replica);
      this.renewedAt = Date.now();
      if (!holding) this.logger.log({ replica: this.replica }, `leading: this replica ${this.duty}`);
    } catch (e) {
      if (holding) this.logger.warn({ replica: this.replica, err: (e as Error).message }, `lost the lease: another replica ${this.duty}`);
      this.revision = undefined;
    }
  }
}
