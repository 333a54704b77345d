import { Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import type { KV } from '@nats-io/kv';
import { DEPLOYMENTS_BUCKET, type DeploymentRecord, ROUTES_BUCKET, type RouteRecord } from '#tern/contracts';
import { Messaging } from '#tern/messaging';

/** Longest a request waits for the first load of the tables before it is answered from what is there. */
const FIRST_LOAD_WAIT_MS = 5_000;

type Listener = (deploymentId: string, version: number) => void;

/**
 * The data plane's view of the KV buckets `deployments` and `routes`, kept by watching both:
 * a watch delivers the current values first and every change after, so start-up and updates
 * are one code path.
 */
@Injectable()
export class RoutingTable implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('routing-table');
  /** key `<workspaceId>/<name>` → version → record */
  private readonly byName = new Map<string, Map<number, DeploymentRecord>>();
  private readonly deploymentKeys = new Map<string, DeploymentRecord>();
  private readonly routes = new Map<string, RouteRecord>();
  private readonly listeners = new Set<Listener>();
  private readonly stops: (() => void)[] = [];
  private readonly loaded: Promise<void>[] = [];
  private isLoaded = false;

  constructor(private readonly messaging: Messaging) {}

  onApplicationBootstrap(): void {
    this.loaded.push(this.follow<DeploymentRecord>(DEPLOYMENTS_BUCKET.name, (key, value) => this.onDeployment(key, value)));
    this.loaded.push(this.follow<RouteRecord>(ROUTES_BUCKET.name, (key, value) => this.onRoute(key, value)));
  }

  onApplicationShutdown(): void {
    for (const stop of this.stops) stop();
  }

  /** Resolves once both buckets' current values are in (or after a few seconds, whatever is there). */
  async ready(): Promise<void> {
    // Every request calls this: once loaded, answer without arming another timer.
    if (this.isLoaded) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all(this.loaded).then(() => void (this.isLoaded = true)),
      new Promise((r) => (timer = setTimeout(r, FIRST_LOAD_WAIT_MS))),
    ]);
    clearTimeout(timer);
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
    return this.deploymentKeys.get(`${deploymentId}.${version}`);
  }

  routesOf(deploymentId: string, version: number): RouteRecord[] {
    return [...this.routes.values()].filter((r) => r.deploymentId === deploymentId && r.version === version);
  }

  private onDeployment(key: string, value: DeploymentRecord | undefined): void {
    const old = this.deploymentKeys.get(key);
    if (old) this.byName.get(`${old.workspaceId}/${old.name}`)?.delete(old.version);
    if (value) {
      this.deploymentKeys.set(key, value);
      const nameKey = `${value.workspaceId}/${value.name}`;
      if (!this.byName.has(nameKey)) this.byName.set(nameKey, new Map());
      this.byName.get(nameKey)!.set(value.version, value);
    } else this.deploymentKeys.delete(key);
    const changed = value ?? old;
    if (changed) this.notify(changed.deploymentId, changed.version);
  }

  private onRoute(key: string, value: RouteRecord | undefined): void {
    const old = this.routes.get(key);
    if (value) this.routes.set(key, value);
    else this.routes.delete(key);
    const changed = value ?? old;
    if (changed) this.notify(changed.deploymentId, changed.version);
  }

  private notify(deploymentId: string, version: number): void {
    for (const l of this.listeners) l(deploymentId, version);
  }

  /** Watches a bucket for good; resolves once its current values have been delivered. */
  private async follow<T>(bucket: string, apply: (key: string, value: T | undefined) => void): Promise<void> {
    let kv: KV;
    try {
      kv = await this.messaging.kv({ name: bucket });
    } catch (e) {
      this.logger.error(`cannot open KV ${bucket}: ${(e as Error).message}; endpoints answer 404 until the gateway restarts`);
      return;
    }
    const status = await kv.status();
    const watch = await kv.watch();
    this.stops.push(() => watch.stop());
    let markLoaded!: () => void;
    const loaded = new Promise<void>((r) => (markLoaded = r));
    if (status.values === 0) markLoaded();
    void (async () => {
      for await (const e of watch) {
        if (e.operation === 'PUT') {
          try {
            apply(e.key, e.json<T>());
          } catch (err) {
            this.logger.warn(`ignored unreadable ${bucket} entry ${e.key}: ${(err as Error).message}`);
          }
        } else apply(e.key, undefined);
        if (e.delta === 0 || e.isUpdate) markLoaded();
      }
    })();
    return loaded;
  }
}
