import pg from 'pg';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';

// Plain JS: Jest loads global hooks outside its ESM transform, so no TS or path mapping here.
const DATABASE_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const NATS_URL = process.env.TEST_NATS_URL ?? 'nats://127.0.0.1:4222';

/** Sweeps what this run's tests left behind (a test that crashed before its own cleanup). */
export default async function globalTeardown() {
  const prefix = `tt${process.env.TERN_TEST_RUN}_`;
  try {
    const nc = await connect({ servers: NATS_URL, name: 'tern-test-teardown' });
    const jsm = await jetstreamManager(nc);
    for await (const name of jsm.streams.names()) {
      if (name.replace(/^(KV|OBJ)_/, '').startsWith(prefix)) await jsm.streams.delete(name).catch(() => undefined);
    }
    await nc.close();
  } catch (e) {
    console.warn(`teardown: NATS sweep skipped (${e.message})`);
  }
  const client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  try {
    const { rows } = await client.query('SELECT nspname FROM pg_namespace WHERE nspname LIKE $1', [`${prefix}%`]);
    for (const r of rows) await client.query(`DROP SCHEMA IF EXISTS "${r.nspname}" CASCADE`);
  } finally {
    await client.end();
  }
}
