import { Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { type KV } from '@nats-io/kv';
import { DataSource } from 'typeorm';
import { ROUTES_BUCKET, type RouteRecord } from '#tern/contracts';
import { encode, Messaging } from '#tern/messaging';
import { queryRows } from '#tern/persistence';
import { routeCapacity } from './start-command.js';

interface RouteRow {
  id: string;
  machine_id: string | null;
  state: string;
  ready_at: Date | null;
  deployment_id: string;
  version: number;
  spec: { workers?: number; concurrentRequests?: number };
}

const ROUTE_ROWS = `
  SELECT c.id, c.machine_id, c.state, c.ready_at, dv.deployment_id::text AS deployment_id, dv.version, dv.spec
  FROM containers c JOIN deployment_versions dv ON dv.id = c.deployment_version_id`;

/**
 * The `routes` KV bucket: one RouteRecord per container that is running and has passed its
 * health check. The containers table decides; the bucket follows it (put on ready, deleted on
 * stopping, stopped, failed or machine offline, and made equal to the table at start-up).
 */
@Injectable()
export class RouteTable implements OnApplicationBootstrap {
  private readonly logger = new Logger('routes');

  constructor(
    private readonly dataSource: DataSource,
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
    const [row] = await this.rows(`${ROUTE_ROWS} WHERE c.id = $1`, [containerId]);
    if (!row || !routable(row)) return this.remove([containerId]);
    const kv = await this.open();
    await kv.put(row.id, encode(route(row)));
    // Stopped while the route was being written: take it back out.
    const [again] = await this.rows(`${ROUTE_ROWS} WHERE c.id = $1`, [containerId]);
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
    const rows = await this.rows(`${ROUTE_ROWS} WHERE c.state = 'running' AND c.ready_at IS NOT NULL AND c.machine_id IS NOT NULL`);
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

  private async rows(sql: string, params: unknown[] = []): Promise<RouteRow[]> {
    const runner = this.dataSource.createQueryRunner();
    try {
      return await queryRows<RouteRow>(runner, sql, params);
    } finally {
      await runner.release();
    }
  }
}

function routable(r: RouteRow): boolean {
  return r.state === 'running' && r.ready_at !== null && r.machine_id !== null;
}

function route(r: RouteRow): RouteRecord {
  return {
    containerId: r.id,
    deploymentId: r.deployment_id,
    version: r.version,
    machineId: r.machine_id!,
    capacity: routeCapacity({ workers: r.spec?.workers ?? 1, concurrentRequests: r.spec?.concurrentRequests ?? 1 }),
    readyAt: r.ready_at!.toISOString(),
  };
}
