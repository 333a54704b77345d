import { Gauge } from 'prom-client';
import type { DataSource } from 'typeorm';

/** pg's Pool as TypeORM's Postgres driver holds it (driver.master). */
interface PgPool {
  totalCount: number;
  idleCount: number;
  waitingCount: number;
}

const sources = new Set<DataSource>();
let gauge: Gauge | undefined;

/**
 * Postgres pool use, read at scrape time: connections open and idle, and queries waiting for
 * one (a pool too small for the load shows here first). Registered by the first pool watched,
 * so only services with a database export it.
 */
function poolGauge(): Gauge {
  return (gauge ??= new Gauge({
    name: 'tern_postgres_pool_connections',
    help: 'Postgres pool connections: total (open), idle, and waiting (queries queued for a connection)',
    labelNames: ['state'],
    collect() {
      const sum = { total: 0, idle: 0, waiting: 0 };
      for (const source of sources) {
        const pool = (source.driver as unknown as { master?: PgPool }).master;
        if (!pool) continue;
        sum.total += pool.totalCount;
        sum.idle += pool.idleCount;
        sum.waiting += pool.waitingCount;
      }
      for (const [state, value] of Object.entries(sum)) this.set({ state }, value);
    },
  }));
}

/** Counts `source`'s pool on /metrics until it is destroyed. */
export function watchPool(source: DataSource): DataSource {
  poolGauge();
  sources.add(source);
  const destroy = source.destroy.bind(source);
  source.destroy = async () => {
    sources.delete(source);
    await destroy();
  };
  return source;
}
