import { Test, type TestingModule } from '@nestjs/testing';
import { getRepositoryToken } from '@nestjs/typeorm';
import { ConfigModule, loadConfig } from '#tern/config';
import { MigrationFailedError, PersistenceModule, Task, Workspace } from '#tern/persistence';
import pg from 'pg';
import { DataSource, type Repository } from 'typeorm';
import { createTestSchema, testEnv, type TestSchema } from '../support/isolation.js';

let schema: TestSchema;

beforeAll(async () => {
  schema = await createTestSchema('persistencemodule');
});

afterAll(async () => {
  await schema?.drop();
});

async function boot(extra: Record<string, string> = {}): Promise<TestingModule> {
  const config = loadConfig('gateway', testEnv(schema, 'unused', extra));
  const moduleRef = await Test.createTestingModule({ imports: [ConfigModule.forRoot(config), PersistenceModule.forRoot()] }).compile();
  return moduleRef.init();
}

describe('PersistenceModule', () => {
  it('leaves the schema alone when DATABASE_RUN_MIGRATIONS is off', async () => {
    const app = await boot({ DATABASE_RUN_MIGRATIONS: 'false' });
    try {
      const dataSource = app.get(DataSource);
      expect(dataSource.isInitialized).toBe(true);
      expect(await dataSource.showMigrations()).toBe(true); // pending
    } finally {
      await app.close();
    }
  });

  it('migrates before the DataSource is handed out and provides repositories', async () => {
    const app = await boot();
    try {
      const dataSource = app.get(DataSource);
      expect(await dataSource.showMigrations()).toBe(false); // nothing pending
      const workspaces = app.get<Repository<Workspace>>(getRepositoryToken(Workspace));
      const ws = await workspaces.save({ name: 'from-nest' });
      expect(ws.id).toBeDefined();
      expect(app.get<Repository<Task>>(getRepositoryToken(Task)).metadata.tablePath).toBe(`${schema.schema}.tasks`);
    } finally {
      await app.close();
    }
  });

  it('fails fast, without connect retries, when a migration fails', async () => {
    const broken = await createTestSchema('persistencebroken');
    const client = new pg.Client({ connectionString: broken.url });
    await client.connect();
    await client.query(`CREATE TABLE "${broken.schema}".workspaces (id int)`); // the migration's CREATE TABLE collides
    await client.end();
    try {
      const config = loadConfig('gateway', testEnv(broken, 'unused'));
      const started = Date.now();
      const compiling = Test.createTestingModule({ imports: [ConfigModule.forRoot(config), PersistenceModule.forRoot()] }).compile();
      await expect(compiling).rejects.toBeInstanceOf(MigrationFailedError);
      await expect(compiling).rejects.toThrow('relation "workspaces" already exists');
      expect(Date.now() - started).toBeLessThan(2500); // the module's retry delay is 3 s
    } finally {
      await broken.drop();
    }
  });
});
