import { createHash } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { schemaOf } from './data-source.js';

/** Anything with a log method: Nest's Logger, console. */
export interface MigrationLogger {
  log(message: string): void;
}

/** First key of the two-key advisory lock: "tern" in ASCII, so the lock is recognisable in pg_locks. */
const LOCK_NAMESPACE = 0x7465726e;

/** Second key: per schema, so per-test schemas do not queue behind each other. */
function lockKey(schema: string): number {
  return createHash('sha256').update(schema).digest().readInt32BE(0);
}

/**
 * Brings the schema up to date. Several services start at once and each may run this, so the
 * whole of it (schema creation included) runs under a session advisory lock held on its own
 * connection: the first caller migrates, the others wait and then find nothing pending. If
 * the process dies, Postgres drops the lock with the connection. Needs a pool of at least two
 * connections (the lock's and the migrations'). Returns the names of the migrations it ran.
 */
export async function runMigrations(dataSource: DataSource, logger?: MigrationLogger): Promise<string[]> {
  const schema = schemaOf(dataSource);
  const key = lockKey(schema);
  const lock = dataSource.createQueryRunner('master');
  await lock.connect();
  try {
    await lock.query('SELECT pg_advisory_lock($1, $2)', [LOCK_NAMESPACE, key]);
    try {
      // Checked first because CREATE SCHEMA IF NOT EXISTS still demands the CREATE privilege,
      // which a deployment may rightly withhold once the schema exists.
      const found = await lock.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]);
      if (found.length === 0) {
        await lock.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
        logger?.log(`created schema ${schema}`);
      }
      const ran = await dataSource.runMigrations({ transaction: 'each' });
      const names = ran.map((m) => m.name);
      logger?.log(names.length ? `ran migrations in ${schema}: ${names.join(', ')}` : `schema ${schema} is up to date`);
      return names;
    } finally {
      await lock.query('SELECT pg_advisory_unlock($1, $2)', [LOCK_NAMESPACE, key]);
    }
  } finally {
    await lock.release();
  }
}
