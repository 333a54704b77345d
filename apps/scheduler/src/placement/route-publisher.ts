import { Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { type KV } from '@nats-io/kv';
import { ROUTES_BUCKET, type RouteRecord } from '#tern/contracts';
import { encode, Messaging } from '#tern/messaging';
import { ContainersRepository, type RouteSource } from '#tern/persistence';
import { routeCapacity } from './start-command.js';

/**
 * The `routes` KV bucket: one RouteRecord per container that is running and has passed its
 * health check. The containers table decides; the bucket follows it (put on ready, deleted on
 * stopping, stopped, failed or machine offline, and made equal to the table at start-up).
 */
@Injectable()
export class RoutePublisher implements OnApplicationBootstrap {
  private readonly logger = new Logger('routes');

  constructor(
    private readonly containers: ContainersRepository,
    private readonly messaging: Messaging,
  ) {}

  async onApplicationBootstrap() {
    try {
      const { put, deleted } = await this.sync();
      this.logger.log(`routes synced with the containers table: ${put} put, ${deleted} deleted`);
    } catch (e) {
      this.logger.warn(`could not sync routes (${(e as Error).message}); ready events and the reconcile loop will repair them`);
    }
  }

  /** Puts the container's route if it is routable now; deletes it otherwise. */
  async refresh(containerId: string): Promise<void> {
    const row = await this.containers.routeSourceOf(containerId);
    if (!row || !routable(row)) return this.remove([containerId]);
    const kv = await this.open();
    await kv.put(row.id, encode(route(row)));
    // Stopped while the route was being written: take it back out.
    const again = await this.containers.routeSourceOf(containerId);
    if (!again || !routable(again)) await this.remove([containerId]);
  }

  async remove(containerIds: readonly string[]): Promise<void> {
    if (!containerIds.length) return;
    const kv = await this.open();
    for (const id of containerIds) await kv.delete(id);
  }

  /** Makes the bucket equal to the table's routable containers. */
  async sync(): Promise<{ put: number; deleted: number }> {
    const kv = await this.open();
    const rows = await this.containers.routable();
    const live = new Set(rows.map((r) => r.id));
    let deleted = 0;
    for await (const key of await kv.keys()) {
      if (!live.has(key)) {
        await kv.delete(key);
        deleted++;
      }
    }
    for (const r of rows) await kv.put(r.id, encode(route(r)));
    return { put: rows.length, deleted };
  }

  private open(): Promise<KV> {
    return this.messaging.kv({ name: ROUTES_BUCKET.name });
  }
}

function routable(r: RouteSource): boolean {
  return r.state === 'running' && r.readyAt !== null && r.machineId !== null;
}

function route(r: RouteSource): RouteRecord {
  return {
    containerId: r.id,
    deploymentId: r.deploymentId,
    version: r.version,
    machineId: r.machineId!,
    capacity: routeCapacity({ workers: r.spec?.workers ?? 1, concurrentRequests: r.spec?.concurrentRequests ?? 1 }),
    readyAt: r.readyAt!.toISOString(),
  };
}
