import { Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { DEPLOYMENTS_BUCKET, type DeploymentRecord, ROUTES_BUCKET, type RouteRecord } from '#tern/contracts';
import { KvMirror, Messaging } from '#tern/messaging';

/**
 * Longest a request waits for the first load of the tables; past it the request is answered 503
 * (a gateway started while its NATS server was lost or electing: an empty table would say 404).
 */
const FIRST_LOAD_WAIT_MS = 5_000;

/** The 503's message while the tables have not loaded (the caller retries, as with any 503). */
export const TABLE_NOT_LOADED = 'this gateway is still loading its deployment table from NATS; retry shortly';

type Listener = (deploymentId: string, version: number) => void;

/**
 * The data plane's view of the KV buckets `deployments` and `routes`: a mirror of each (the
 * scheduler's RoutePublisher and the gateway's deployment records write them), indexed by
 * workspace and name for requests.
 */
@Injectable()
export class RoutesMirror implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('routes-mirror');
  /** key `<workspaceId>/<name>` → version → record */
  private readonly byName = new Map<string, Map<number, DeploymentRecord>>();
  private readonly listeners = new Set<Listener>();
  private readonly deployments: KvMirror<DeploymentRecord>;
  private readonly routes: KvMirror<RouteRecord>;

  constructor(messaging: Messaging) {
    this.deployments = new KvMirror<DeploymentRecord>({
      bucket: DEPLOYMENTS_BUCKET.name,
      open: () => messaging.kv({ name: DEPLOYMENTS_BUCKET.name }),
      logger: this.logger,
      onChange: (_key, value, old) => this.onDeployment(value, old),
    });
    this.routes = new KvMirror<RouteRecord>({
      bucket: ROUTES_BUCKET.name,
      open: () => messaging.kv({ name: ROUTES_BUCKET.name }),
      logger: this.logger,
      onChange: (_key, value, old) => {
        const changed = value ?? old;
        if (changed) this.notify(changed.deploymentId, changed.version);
      },
    });
  }

  onApplicationBootstrap(): void {
    this.deployments.start();
    this.routes.start();
  }

  async onApplicationShutdown(): Promise<void> {
    await Promise.all([this.deployments.stop(), this.routes.stop()]);
  }

  /** Whether both buckets' current values are in, waiting up to FIRST_LOAD_WAIT_MS for their first load. */
  async ready(): Promise<boolean> {
    // Every request calls this: once loaded, it answers without arming a timer.
    if (this.deployments.isLoaded && this.routes.isLoaded) return true;
    const loaded = await Promise.all([this.deployments.ready(FIRST_LOAD_WAIT_MS), this.routes.ready(FIRST_LOAD_WAIT_MS)]);
    return loaded.every(Boolean);
  }

  /** Called when the routes or the record of a version change. */
  onChange(listener: Listener): void {
    this.listeners.add(listener);
  }

  /** A workspace's deployment by name: the pinned version, or the latest. */
  find(workspaceId: string, name: string, version?: number): { record?: DeploymentRecord; known: boolean } {
    const versions = this.byName.get(`${workspaceId}/${name}`);
    if (!versions?.size) return { known: false };
    if (version !== undefined) return { record: versions.get(version), known: true };
    const all = [...versions.values()];
    const latest = all.find((r) => r.latest) ?? all.reduce((a, b) => (b.version > a.version ? b : a));
    return { record: latest, known: true };
  }

  record(deploymentId: string, version: number): DeploymentRecord | undefined {
    return this.deployments.get(`${deploymentId}.${version}`);
  }

  routesOf(deploymentId: string, version: number): RouteRecord[] {
    return [...this.routes.values()].filter((r) => r.deploymentId === deploymentId && r.version === version);
  }

  private onDeployment(value: DeploymentRecord | undefined, old: DeploymentRecord | undefined): void {
    if (old) this.byName.get(`${old.workspaceId}/${old.name}`)?.delete(old.version);
    if (value) {
      const nameKey = `${value.workspaceId}/${value.name}`;
      if (!this.byName.has(nameKey)) this.byName.set(nameKey, new Map());
      this.byName.get(nameKey)!.set(value.version, value);
    }
    const changed = value ?? old;
    if (changed) this.notify(changed.deploymentId, changed.version);
  }

  private notify(deploymentId: string, version: number): void {
    for (const l of this.listeners) l(deploymentId, version);
  }
}
