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

  async remove(machineId: string): Promise<void> {
    await this.open()
      .then((kv) => kv.purge(machineId))
      .catch(() => undefined);
  }

  /** Opened (and created when missing, same settings everywhere) once per process by Messaging. */
  private open(): Promise<KV> {
    return this.messaging.kv({ name: HEARTBEATS_BUCKET.name, ttlMs: this.config.machines.heartbeatTtlSeconds * 1000 });
  }
}
