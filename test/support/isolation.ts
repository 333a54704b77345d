import { randomBytes } from 'node:crypto';
import pg from 'pg';

/**
 * Every integration test file gets its own Postgres schema and its own NATS namespace
 * (the first token of every subject, stream, bucket and service name), so runs never see
 * each other's data and CI can share the machine's servers. Both are removed afterwards;
 * global-teardown sweeps anything a crashed run left behind.
 */
/** Set once per run by global-setup; a file run on its own gets its own. */
export function runPrefix(): string {
  process.env.TERN_TEST_RUN ??= randomBytes(3).toString('hex');
  return `tt${process.env.TERN_TEST_RUN}_`;
}

export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
/** The run's NATS (operator mode, started by global-setup) and the harness's own user there. */
export const TEST_NATS_URL = process.env.TEST_NATS_URL ?? 'nats://127.0.0.1:4222';
export const TEST_NATS_CREDS = process.env.TEST_NATS_CREDS;
/** Connection options for the test process itself: spread into connectNats({ ...TEST_NATS, name }). */
export const TEST_NATS = { servers: [TEST_NATS_URL], ...(TEST_NATS_CREDS ? { credsFile: TEST_NATS_CREDS } : {}) };

export function uniqueName(label: string): string {
  return `${runPrefix()}${label
    .replace(/[^a-z0-9]/gi, '')
    .toLowerCase()
    .slice(0, 20)}_${randomBytes(4).toString('hex')}`;
}

export interface TestSchema {
  readonly url: string;
  readonly schema: string;
  drop(): Promise<void>;
}

export async function createTestSchema(label: string): Promise<TestSchema> {
  const schema = uniqueName(label);
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await client.connect();
  await client.query(`CREATE SCHEMA "${schema}"`);
  await client.end();
  return {
    url: TEST_DATABASE_URL,
    schema,
    async drop() {
      const c = new pg.Client({ connectionString: TEST_DATABASE_URL });
      await c.connect();
      await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await c.end();
    },
  };
}

/** Environment for a service process or loadConfig() bound to one test's schema and namespace. */
export function testEnv(schema: TestSchema | undefined, namespace: string, extra: Record<string, string> = {}) {
  return {
    NATS_URL: TEST_NATS_URL,
    NATS_NAMESPACE: namespace,
    ...(schema ? { DATABASE_URL: schema.url, DATABASE_SCHEMA: schema.schema } : {}),
    LOG_FORMAT: 'json',
    LOG_LEVEL: 'info',
    ...extra,
  };
}
