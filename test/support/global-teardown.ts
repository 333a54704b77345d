import pg from 'pg';
import { TEST_DATABASE_URL, runPrefix } from './isolation.js';
import { deleteNamespaces } from './nats.js';

/** Sweeps what this run's tests left behind (a test that crashed before its own cleanup). */
export default async function globalTeardown() {
  const prefix = runPrefix();
  await deleteNamespaces(prefix).catch(() => undefined);
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await client.connect();
  try {
    const { rows } = await client.query<{ nspname: string }>(`SELECT nspname FROM pg_namespace WHERE nspname LIKE $1`, [`${prefix}%`]);
    for (const r of rows) await client.query(`DROP SCHEMA IF EXISTS "${r.nspname}" CASCADE`);
  } finally {
    await client.end();
  }
}
