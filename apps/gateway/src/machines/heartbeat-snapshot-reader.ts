import { Inject, Injectable, Logger } from '@nestjs/common';
import { type KV } from '@nats-io/kv';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { HEARTBEATS_BUCKET, type HeartbeatSnapshot } from '#tern/contracts';
import { Messaging } from '#tern/messaging';

/**
 * Reads the scheduler's last-heartbeat snapshots for the machines API. Best effort: without
 * NATS or the bucket, machines are still listed, only without current CPU and memory use.
 */
@Injectable()
export class HeartbeatSnapshotReader {
  private readonly logger = new Logger('heartbeat-snapshot-reader');

  constructor(
    private readonly messaging: Messaging,
    @Inject(TERN_CONFIG) private readonly config: TernConfig,
  ) {}

  async get(machineId: string): Promise<HeartbeatSnapshot | undefined> {
    try {
      const entry = await (await this.open()).get(machineId);
      return entry && entry.operation === 'PUT' && entry.length > 0 ? (entry.json() as HeartbeatSnapshot) : undefined;
    } catch (e) {
      this.logger.warn(`heartbeat snapshot of ${machineId} unavailable: ${(e as Error).message}`);
      return undefined;
    }
  }

  async getMany(machineIds: string[]): Promise<Map<string, HeartbeatSnapshot>> {
    const found = await Promise.all(machineIds.map(async (id) => [id, await this.get(id)] as const));
    return new Map(found.filter((f): f is readonly [string, HeartbeatSnapshot] => f[1] !== undefined));
  }

  /**
   * Erases a deleted machine's entry: its message deleted by sequence, the one thing the
   * gateway's NATS user may do to the bucket besides reading (BUCKET_ACCESS `erase`: it can
   * erase an entry, never write one). A beat the scheduler was storing at that moment may
   * leave one more entry (deleted again here, a few times at most); the bucket's TTL ends any.
   */
  async remove(machineId: string): Promise<void> {
    try {
      const kv = await this.open();
      const jsm = await this.messaging.jsm();
      const stream = `KV_${this.messaging.ns.bucket(HEARTBEATS_BUCKET.name)}`;
      for (let tries = 0; tries < 3; tries++) {
        const entry = await kv.get(machineId);
        if (!entry || entry.operation !== 'PUT') return;
        await jsm.streams.deleteMessage(stream, entry.revision, false);
      }
    } catch (e) {
      this.logger.warn(`heartbeat snapshot of ${machineId} not erased (the bucket's TTL will): ${(e as Error).message}`);
    }
  }

  /** Opened (and created when missing, same settings everywhere) once per process by Messaging. */
  private open(): Promise<KV> {
    return this.messaging.kv({ name: HEARTBEATS_BUCKET.name, ttlMs: this.config.machines.heartbeatTtlSeconds * 1000 });
  }
}
