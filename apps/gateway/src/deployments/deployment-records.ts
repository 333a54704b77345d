import { Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { type KV } from '@nats-io/kv';
import { DEPLOYMENTS_BUCKET, type DeploymentRecord, deploymentKey, type ResolvedSpec } from '#tern/contracts';
import { encode, Messaging } from '#tern/messaging';
import { type Deployment, DeploymentsRepository, type DeploymentVersion } from '#tern/persistence';
import { resolvedOf } from './stored-spec.js';

/**
 * Mirrors Postgres into the KV bucket `deployments` for the services that do not read
 * Postgres (autoscaler, data plane). Every write rewrites all of one deployment's records from
 * the rows as they are now, so two racing deploys still leave the last word correct, and the
 * whole bucket is rewritten at start-up so a write lost to a NATS outage is repaired.
 */
@Injectable()
export class DeploymentRecords implements OnApplicationBootstrap {
  private readonly logger = new Logger('deployment-records');

  constructor(
    private readonly messaging: Messaging,
    private readonly deployments: DeploymentsRepository,
  ) {}

  private open(): Promise<KV> {
    return this.messaging.kv({ name: DEPLOYMENTS_BUCKET.name });
  }

  /** Deleted deployments have no records (the autoscaler winds them down); stopped ones say so. */
  async write(deploymentId: string): Promise<void> {
    const kv = await this.open();
    const deployment = await this.deployments.findById(deploymentId);
    const versions = await this.deployments.versionsOf(deploymentId, 'ASC');
    for (const v of versions) {
      const key = deploymentKey(deployment.id, v.version);
      if (deployment.state === 'deleted') await kv.delete(key);
      else await kv.put(key, encode(record(deployment, v)));
    }
  }

  async onApplicationBootstrap(): Promise<void> {
    try {
      await this.syncAll();
    } catch (e) {
      // Start anyway: the API works without NATS, and the next deploy, stop or start rewrites its deployment.
      this.logger.error(`could not mirror deployments into KV ${DEPLOYMENTS_BUCKET.name}: ${(e as Error).message}`);
    }
  }

  /** Rewrites every record and drops keys whose version no longer exists or whose deployment is deleted. */
  async syncAll(): Promise<number> {
    const kv = await this.open();
    const live = new Set<string>();
    for (const d of await this.deployments.listAll()) {
      await this.write(d.id);
      if (d.state === 'deleted') continue;
      for (let v = 1; v <= d.latestVersion; v++) live.add(deploymentKey(d.id, v));
    }
    for await (const key of await kv.keys()) if (!live.has(key)) await kv.delete(key);
    this.logger.log(`mirrored ${live.size} deployment versions into KV ${DEPLOYMENTS_BUCKET.name}`);
    return live.size;
  }
}

function record(d: Deployment, v: DeploymentVersion): DeploymentRecord {
  return {
    deploymentId: d.id,
    workspaceId: d.workspaceId,
    name: d.name,
    version: v.version,
    latest: v.version === d.latestVersion,
    state: d.state === 'stopped' ? 'stopped' : 'active',
    spec: resolvedOf(v) satisfies ResolvedSpec,
    updatedAt: d.updatedAt.toISOString(),
  };
}
