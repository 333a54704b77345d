import { Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import type { KvWatchEntry } from '@nats-io/kv';
import type { QueuedIterator } from '@nats-io/transport-node';
import { DEPLOYMENTS_BUCKET, type DeploymentRecord } from '#tern/contracts';
import { Messaging } from '#tern/messaging';

/** A version the autoscaler acts on; removed once its key is deleted from the bucket. */
export interface TrackedVersion {
  readonly key: string;
  readonly record: DeploymentRecord;
  readonly removed: boolean;
}

/**
 * Follows the `deployments` KV bucket (the gateway's mirror of Postgres): every version's
 * record, from the bucket's current values on, so a restarted autoscaler knows them all.
 */
@Injectable()
export class DeploymentCatalog implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('deployments');
  private readonly versions = new Map<string, TrackedVersion>();
  private watcher?: QueuedIterator<KvWatchEntry>;
  private stopped = false;

  constructor(private readonly messaging: Messaging) {}

  async onApplicationBootstrap() {
    const kv = await this.messaging.kv({ name: DEPLOYMENTS_BUCKET.name });
    this.watcher = await kv.watch();
    void this.follow(this.watcher);
  }

  async onApplicationShutdown() {
    this.stopped = true;
    this.watcher?.stop();
  }

  all(): TrackedVersion[] {
    return [...this.versions.values()];
  }

  get(key: string): TrackedVersion | undefined {
    return this.versions.get(key);
  }

  /** The latest active endpoint version of a deployment (where a backlog without a version belongs). */
  latest(deploymentId: string): TrackedVersion | undefined {
    return this.all().find((v) => !v.removed && v.record.deploymentId === deploymentId && v.record.latest && v.record.state === 'active');
  }

  /** Forgets a removed version once the loop has told the scheduler to run none of it. */
  forget(key: string) {
    if (this.versions.get(key)?.removed) this.versions.delete(key);
  }

  private async follow(watcher: QueuedIterator<KvWatchEntry>) {
    try {
      for await (const e of watcher) this.apply(e);
    } catch (err) {
      if (!this.stopped) this.logger.error(`deployments watch ended: ${(err as Error).message}`);
    }
  }

  private apply(e: KvWatchEntry) {
    if (e.operation !== 'PUT') {
      const known = this.versions.get(e.key);
      if (known) this.versions.set(e.key, { ...known, removed: true });
      return;
    }
    let record: DeploymentRecord;
    try {
      record = e.json<DeploymentRecord>();
    } catch {
      this.logger.warn({ key: e.key }, 'ignored a deployments entry that is not JSON');
      return;
    }
    // Endpoints scale on gateway load reports, task queues on their TASKS backlog; functions and cron are not scaled.
    if ((record?.spec?.kind !== 'endpoint' && record?.spec?.kind !== 'task_queue') || typeof record.version !== 'number' || !record.spec.autoscaler) return;
    this.versions.set(e.key, { key: e.key, record, removed: false });
  }
}
