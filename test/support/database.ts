import type { DataSource } from 'typeorm';
import { createDataSource, runMigrations } from '#tern/persistence';
import { createTestSchema, type TestSchema } from './isolation.js';

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
