import { Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { type KV } from '@nats-io/kv';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { HEARTBEATS_BUCKET, type HeartbeatSnapshot, type MachineHeartbeat } from '#tern/contracts';
import { Messaging } from '#tern/messaging';

/**
 * The last heartbeat of every machine in the `heartbeats` KV bucket: fast-changing state
 * that does not belong in Postgres (CPU and memory use, free GPUs, running containers).
 * The bucket's TTL is the heartbeat TTL, so a silent machine's entry disappears by itself.
 */
@Injectable()
export class HeartbeatSnapshotPublisher implements OnModuleInit {
  private readonly logger = new Logger('heartbeats');

  constructor(
    private readonly messaging: Messaging,
    @Inject(TERN_CONFIG) private readonly config: TernConfig,
  ) {}

  async onModuleInit() {
    await this.open();
  }

  /** Best effort: a lost snapshot only leaves the machines API a beat behind. */
  async put(beat: MachineHeartbeat): Promise<void> {
    try {
      const kv = await this.open();
      const snapshot: HeartbeatSnapshot = { ...beat, receivedAt: new Date().toISOString() };
      await kv.put(beat.machineId, JSON.stringify(snapshot));
    } catch (e) {
      this.logger.warn({ machineId: beat.machineId, err: (e as Error).message }, 'could not store the heartbeat snapshot');
    }
  }

  /** Opened (and created when missing, same settings everywhere) once per process by Messaging. */
  private open(): Promise<KV> {
    return this.messaging.kv({ name: HEARTBEATS_BUCKET.name, ttlMs: this.config.machines.heartbeatTtlSeconds * 1000 });
  }
}
