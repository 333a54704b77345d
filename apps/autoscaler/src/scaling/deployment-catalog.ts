import { Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { DEPLOYMENTS_BUCKET, type DeploymentRecord, pullsTasks } from '#tern/contracts';
import { KvMirror, Messaging } from '#tern/messaging';

/** A version the autoscaler acts on; removed once its key is deleted from the bucket. */
export interface TrackedVersion {
  readonly key: string;
  readonly record: DeploymentRecord;
  readonly removed: boolean;
}

/**
 * The versions the autoscaler acts on: a mirror of the `deployments` KV bucket (the gateway's
 * copy of Postgres) from its current values on, so a restarted autoscaler knows them all, plus
 * the versions deleted from it until the loop has scaled them to nothing.
 */
@Injectable()
export class DeploymentCatalog implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('deployments');
  private readonly mirror: KvMirror<DeploymentRecord>;
  private readonly removed = new Map<string, TrackedVersion>();

  constructor(messaging: Messaging) {
    this.mirror = new KvMirror<DeploymentRecord>({
      bucket: DEPLOYMENTS_BUCKET.name,
      open: () => messaging.kv({ name: DEPLOYMENTS_BUCKET.name }),
      logger: this.logger,
      decode: (_key, entry) => scaled(entry.json<DeploymentRecord>()),
      onChange: (key, value, old) => {
        if (value) this.removed.delete(key);
        else if (old) this.removed.set(key, { key, record: old, removed: true });
      },
    });
  }

  onApplicationBootstrap() {
    this.mirror.start();
  }

  async onApplicationShutdown() {
    await this.mirror.stop();
  }

  all(): TrackedVersion[] {
    const live = [...this.mirror.map()].map(([key, record]) => ({ key, record, removed: false }));
    return [...live, ...this.removed.values()];
  }

  get(key: string): TrackedVersion | undefined {
    const record = this.mirror.get(key);
    return record ? { key, record, removed: false } : this.removed.get(key);
  }

  /** The latest active endpoint version of a deployment (where a backlog without a version belongs). */
  latest(deploymentId: string): TrackedVersion | undefined {
    return this.all().find((v) => !v.removed && v.record.deploymentId === deploymentId && v.record.latest && v.record.state === 'active');
  }

  /** Forgets a removed version once the loop has told the scheduler to run none of it. */
  forget(key: string) {
    this.removed.delete(key);
  }
}

/** Endpoints scale on gateway load reports, task queues and functions on their TASKS backlog; cron is not scaled. */
function scaled(record: DeploymentRecord): DeploymentRecord | undefined {
  if (record?.spec?.kind !== 'endpoint' && !pullsTasks(record?.spec?.kind)) return undefined;
  return typeof record.version === 'number' && record.spec.autoscaler ? record : undefined;
}
