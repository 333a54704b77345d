import { rmSync } from 'node:fs';
import pg from 'pg';
import { stopNats } from '../../scripts/lib/nats.mjs';

// Plain JS: Jest loads global hooks outside its ESM transform, so no TS or path mapping here.
const DATABASE_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** Stops the run's NATS (its store goes with it) and sweeps the schemas a crashed test left behind. */
export default async function globalTeardown() {
  const nats = globalThis.ternTestNats;
  if (nats) {
    globalThis.ternTestNats = undefined;
    await stopNats(nats);
    rmSync(nats.dir, { recursive: true, force: true });
  }
  const prefix = `tt${process.env.TERN_TEST_RUN}_`;
  const client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  try {
    const { rows } = await client.query('SELECT nspname FROM pg_namespace WHERE nspname LIKE $1', [`${prefix}%`]);
    for (const r of rows) await client.query(`DROP SCHEMA IF EXISTS "${r.nspname}" CASCADE`);
  } finally {
    await client.end();
  }
}
