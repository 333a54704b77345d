import type { DataSource } from 'typeorm';
import { createDataSource, runMigrations } from '#tern/persistence';
import { createTestSchema, type TestSchema } from './isolation.js';
import { waitFor } from './processes.js';

/**
 * A migrated schema of the test file's own: opened in a beforeAll registered here (so before the
 * file's own), destroyed and dropped after every test of the file. Read `.db` inside tests and hooks.
 */
export function migratedDatabase(label: string): { readonly db: DataSource } {
  const handle = {} as { db: DataSource };
  let schema: TestSchema | undefined;
  beforeAll(async () => {
    schema = await createTestSchema(label);
    handle.db = await createDataSource({ url: schema.url, schema: schema.schema, runMigrations: true }).initialize();
    await runMigrations(handle.db);
  });
  afterAll(async () => {
    await handle.db?.destroy();
    await schema?.drop();
  });
  return handle;
}

/**
 * Runs `statement` (one that locks task rows `low` < `high` among others) against a transaction
 * that locks them the way the batched task statements do, in id order: `low` first, then, once
 * the statement waits on it, `high`. A statement locking in id order too waits for the
 * transaction and then goes on; one that took `high` first deadlocks with it, and Postgres fails
 * one side after a second. Answers the statement's result.
 */
export async function againstIdOrderedLocks<T>(db: DataSource, low: string, high: string, statement: () => Promise<T>): Promise<T> {
  const batch = db.createQueryRunner();
  await batch.startTransaction();
  try {
    const [{ pid }] = (await batch.query(`SELECT pg_backend_pid() AS pid`)) as { pid: number }[];
    await batch.query(`SELECT id FROM tasks WHERE id = $1 FOR UPDATE`, [low]);
    const running = statement();
    running.catch(() => undefined);
    const blocked = `SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`;
    const waiting = async () => ((await db.query(blocked, [pid])) as { n: number }[])[0].n > 0;
    await waitFor('the statement to wait for the row the transaction holds', waiting, 10_000, 20);
    await batch.query(`SELECT id FROM tasks WHERE id = $1 FOR UPDATE`, [high]);
    await batch.commitTransaction();
    return await running;
  } finally {
    if (batch.isTransactionActive) await batch.rollbackTransaction();
    await batch.release();
  }
}
