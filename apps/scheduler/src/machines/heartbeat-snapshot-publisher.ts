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

  /**
   * Best effort: a lost snapshot only leaves the machines API a beat behind. A core NATS publish
   * on the entry's subject, which the bucket's stream stores as a put, without the acknowledgement
   * `kv.put` waits for: an acknowledged put per beat was a round trip and an ack message per
   * heartbeat for nats-server and the scheduler alike (bench/agents README), and nothing here
   * would act on a refused one but log it.
   */
  put(beat: MachineHeartbeat): void {
    const snapshot: HeartbeatSnapshot = { ...beat, receivedAt: new Date().toISOString() };
    try {
      this.messaging.nc.publish(`$KV.${this.messaging.ns.bucket(HEARTBEATS_BUCKET.name)}.${beat.machineId}`, JSON.stringify(snapshot));
    } catch (e) {
      // A closed or draining connection (shutdown) refuses at once; the beat itself is still recorded.
      this.logger.warn({ machineId: beat.machineId, err: (e as Error).message }, 'could not store the heartbeat snapshot');
    }
  }

  /** Opened (and created when missing, same settings everywhere) once per process by Messaging. */
  private open(): Promise<KV> {
    return this.messaging.kv({ name: HEARTBEATS_BUCKET.name, ttlMs: this.config.machines.heartbeatTtlSeconds * 1000 });
  }
}
