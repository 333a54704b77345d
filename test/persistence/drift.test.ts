import type { DataSource } from 'typeorm';
import { createDataSource, runMigrations } from '#tern/persistence';
import { createTestSchema, type TestSchema } from '../support/isolation.js';

let schema: TestSchema;
let db: DataSource;

beforeAll(async () => {
  schema = await createTestSchema('drift');
  db = await createDataSource({ url: schema.url, schema: schema.schema, runMigrations: true }).initialize();
  await runMigrations(db);
});

afterAll(async () => {
  await db?.destroy();
  await schema?.drop();
});

it('entities and migrations describe the same tables', async () => {
  // What `synchronize` would run (it never does): anything here means an entity and the migrations disagree.
  const pending = await db.driver.createSchemaBuilder().log();
  expect(pending.upQueries.map((q) => q.query)).toEqual([]);
});
