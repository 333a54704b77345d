import { createHash } from 'node:crypto';
import pg from 'pg';
import type { DataSource } from 'typeorm';
import { createDataSource, MIGRATIONS, runMigrations } from '#tern/persistence';
import { TEST_DATABASE_URL, uniqueName } from '../support/isolation.js';

const TABLES = [
  'api_tokens',
  'code_bundles',
  'containers',
  'deployment_versions',
  'deployments',
  'endpoint_request_minutes',
  'machine_fault_outbox',
  'machine_state_changes',
  'machine_state_outbox',
  'machines',
  'map_chunks',
  'maps',
  'metered_containers',
  'metered_tasks',
  'migrations',
  'nats_users',
  'pools',
  'reputation_machines',
  'reputation_scores',
  'sandboxes',
  'scale_events',
  'schedule_ticks',
  'tasks',
  'usage_intervals',
  'volume_chunks',
  'volume_files',
  'volumes',
  'workspace_secrets',
  'workspaces',
];

// Not createTestSchema(): runMigrations must create the schema itself, so it starts missing.
const schema = uniqueName('migrations');
const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
const opened: DataSource[] = [];

async function open(): Promise<DataSource> {
  const dataSource = await createDataSource({ url: TEST_DATABASE_URL, schema, runMigrations: true }).initialize();
  opened.push(dataSource);
  return dataSource;
}

async function tablesIn(name: string): Promise<string[]> {
  const { rows } = await admin.query<{ table_name: string }>(
    'SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name',
    [name],
  );
  return rows.map((r) => r.table_name);
}

async function migrationRows(): Promise<string[]> {
  const { rows } = await admin.query<{ name: string }>(`SELECT name FROM "${schema}".migrations ORDER BY id`);
  return rows.map((r) => r.name);
}

beforeAll(() => admin.connect());

afterAll(async () => {
  await Promise.all(opened.map((d) => d.destroy()));
  await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await admin.end();
});

describe('runMigrations', () => {
  it('serialises concurrent runs: the schema and every table are created once', async () => {
    const [a, b, c] = await Promise.all([open(), open(), open()]);
    expect(await tablesIn(schema)).toEqual([]);

    const ran = await Promise.all([runMigrations(a), runMigrations(b), runMigrations(c)]);

    // Exactly one caller ran the migrations; the others waited on the lock and found nothing to do.
    expect(ran.flat()).toEqual(MIGRATIONS.map((m) => new m().name));
    expect(ran.filter((names) => names.length === 0)).toHaveLength(2);
    expect(await tablesIn(schema)).toEqual(TABLES);
    expect(await migrationRows()).toEqual(MIGRATIONS.map((m) => new m().name));
  });

  it('creates the indices the queries rely on', async () => {
    const { rows } = await admin.query<{ indexname: string; indexdef: string }>(
      'SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = $1',
      [schema],
    );
    const byName = new Map(rows.map((r) => [r.indexname, r.indexdef]));
    for (const index of [
      'ix_machines_pool_state',
      'ix_containers_deployment_version_state',
      'ix_containers_machine_state',
      'ix_tasks_deployment_state_created',
      'ix_tasks_workspace_created',
      'ix_usage_intervals_workspace_period',
      'ix_usage_intervals_machine_period',
      'ix_usage_intervals_deployment_period',
      'uq_usage_intervals_event_id',
      'uq_api_tokens_token_hash',
    ]) {
      expect(byName.has(index)).toBe(true);
    }
    expect(byName.get('ix_reputation_scores_machine_computed')).toContain('computed_at DESC');
  });

  it('is a no-op the second time', async () => {
    const dataSource = await open();
    expect(await runMigrations(dataSource)).toEqual([]);
    expect(await migrationRows()).toEqual(MIGRATIONS.map((m) => new m().name));
  });

  it('logs what it did', async () => {
    const messages: string[] = [];
    await runMigrations(await open(), { log: (m) => messages.push(m) });
    expect(messages).toEqual([`schema ${schema} is up to date`]);
  });

  it('can be reverted and applied again', async () => {
    const dataSource = await open();
    for (let i = 0; i < MIGRATIONS.length; i++) await dataSource.undoLastMigration({ transaction: 'each' });
    expect(await tablesIn(schema)).toEqual(['migrations']);
    expect(await runMigrations(dataSource)).toHaveLength(MIGRATIONS.length);
    expect(await tablesIn(schema)).toEqual(TABLES);
  });

  it('makes the bootstrap admin token the operator, and backfills code bundles from deployed versions', async () => {
    const dataSource = await open();
    // Back to before OperatorRole (and every later migration): a database of that release.
    const back = MIGRATIONS.length - MIGRATIONS.findIndex((m) => new m().name === 'OperatorRole1764600000000');
    for (let i = 0; i < back; i++) await dataSource.undoLastMigration({ transaction: 'each' });
    const q = (sql: string, params: unknown[] = []) => admin.query(sql.replaceAll('S.', `"${schema}".`), params);
    const [ws] = (await q(`INSERT INTO S.workspaces (name) VALUES ('default') RETURNING id`)).rows;
    await q(
      `INSERT INTO S.api_tokens (workspace_id, name, token_hash, prefix, role) VALUES ($1, 'admin (bootstrap)', 'h1', 'tern_aaa', 'admin'), ($1, 'ci', 'h2', 'tern_bbb', 'admin')`,
      [ws.id],
    );
    const [d] = (await q(`INSERT INTO S.deployments (workspace_id, name, kind) VALUES ($1, 'app', 'endpoint') RETURNING id`, [ws.id])).rows;
    await q(`INSERT INTO S.deployment_versions (deployment_id, version, spec) VALUES ($1, 1, $2), ($1, 2, $2)`, [
      d.id,
      JSON.stringify({ code: 'sha256:abc' }),
    ]);

    expect(await runMigrations(dataSource)).toHaveLength(back);
    const tokens = (await q(`SELECT name, role FROM S.api_tokens ORDER BY name`)).rows;
    expect(tokens).toEqual([
      { name: 'ci', role: 'admin' },
      { name: 'operator (bootstrap)', role: 'operator' },
    ]);
    expect((await q(`SELECT workspace_id, digest FROM S.code_bundles`)).rows).toEqual([{ workspace_id: ws.id, digest: 'sha256:abc' }]);
    await q(`DELETE FROM S.workspaces`);
  });

  it('leaves no advisory lock behind', async () => {
    // Same keys as runMigrations: "tern" and the first four bytes of sha256(schema), as oids.
    const key = createHash('sha256').update(schema).digest().readUInt32BE(0);
    const { rows } = await admin.query(`SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND classid = $1::oid AND objid = $2::oid`, [
      0x7465726e,
      key,
    ]);
    expect(rows).toHaveLength(0);
  });
});
