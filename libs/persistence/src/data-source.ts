import type { TernConfig } from '#tern/config';
import { DataSource, type DataSourceOptions } from 'typeorm';
import { ENTITIES } from './entities/index.js';
import { MIGRATIONS } from './migrations/index.js';

export type DatabaseConfig = TernConfig['database'];
export type PostgresDataSourceOptions = Extract<DataSourceOptions, { type: 'postgres' }>;

const SCHEMA_NAME = /^[a-z_][a-z0-9_]*$/;

/**
 * Options for Tern's DataSource. The schema goes both to TypeORM (which qualifies entity
 * queries and the migrations table with it) and to the session's search_path (which the
 * hand-written, unqualified migration SQL relies on), and nothing else is on the path, so a
 * table can never land in `public` by mistake.
 */
export function dataSourceOptions(database: DatabaseConfig): PostgresDataSourceOptions {
  if (!SCHEMA_NAME.test(database.schema)) {
    throw new Error(`database schema ${JSON.stringify(database.schema)}: lower-case letters, digits and _ only`);
  }
  return {
    type: 'postgres',
    url: database.url,
    schema: database.schema,
    entities: [...ENTITIES],
    migrations: [...MIGRATIONS],
    synchronize: false,
    // runMigrations() does it, under an advisory lock; TypeORM's own run would race.
    migrationsRun: false,
    // TypeORM would otherwise CREATE EXTENSION uuid-ossp on connect, into the first schema on
    // the search_path (racing other services and vanishing with a dropped test schema).
    // gen_random_uuid() is built into Postgres 13+, so no extension is needed at all.
    installExtensions: false,
    uuidExtension: 'pgcrypto',
    // A query waits at most 10 s for a pooled connection (Postgres unreachable, the pool drained):
    // then an error, which HTTP answers with 503 (database-unavailable.ts), instead of waiting for ever.
    // Wide enough that a busy pool on a loaded machine does not meet it.
    extra: { options: `-c search_path=${database.schema}`, connectionTimeoutMillis: 10_000 },
  };
}

/** A DataSource for Tern's schema; not yet initialised. */
export function createDataSource(database: DatabaseConfig): DataSource {
  return new DataSource(dataSourceOptions(database));
}

/** The schema a DataSource made by createDataSource works in. */
export function schemaOf(dataSource: DataSource): string {
  return (dataSource.options as PostgresDataSourceOptions).schema ?? 'public';
}
