import { type DynamicModule, Logger, Module } from '@nestjs/common';
import { TypeOrmModule, type TypeOrmModuleOptions } from '@nestjs/typeorm';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { DataSource, type DataSourceOptions } from 'typeorm';
import { dataSourceOptions } from './data-source.js';
import { watchPool } from './pool-metrics.js';
import { ENTITIES } from './entities/index.js';
import { REPOSITORIES } from './repositories/index.js';
import { runMigrations } from './run-migrations.js';

/** Marks a failed migration so the module's connect-retry loop gives up on it instead of retrying. */
export class MigrationFailedError extends Error {
  constructor(cause: unknown) {
    super(`database migrations failed: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'MigrationFailedError';
  }
}

const logger = new Logger('Persistence');

/**
 * @nestjs/typeorm hands the dataSourceFactory only the options, not the injector, so the
 * "run migrations at start" switch travels in `migrationsRun` and is honoured here, under
 * runMigrations' lock, instead of by TypeORM's unlocked built-in run. The DataSource provider
 * resolves only after this returns, so nothing can use the database before it is migrated.
 */
async function openDataSource(options?: DataSourceOptions): Promise<DataSource> {
  if (!options) throw new Error('PersistenceModule: no DataSource options');
  const dataSource = new DataSource({ ...options, migrationsRun: false } as DataSourceOptions);
  await dataSource.initialize();
  if (options.migrationsRun) {
    try {
      await runMigrations(dataSource, logger);
    } catch (error) {
      await dataSource.destroy();
      throw new MigrationFailedError(error);
    }
  }
  return watchPool(dataSource);
}

/**
 * The database for a service: import `PersistenceModule.forRoot()` once in the root module
 * (next to ConfigModule, which provides TERN_CONFIG), then inject a repository
 * (`TasksRepository`, `MachinesRepository`, …) anywhere. Global, so feature modules need not import it again.
 */
@Module({})
export class PersistenceModule {
  static forRoot(): DynamicModule {
    const repositories = TypeOrmModule.forFeature([...ENTITIES]);
    return {
      module: PersistenceModule,
      global: true,
      imports: [
        TypeOrmModule.forRootAsync({
          inject: [TERN_CONFIG],
          useFactory: (config: TernConfig): TypeOrmModuleOptions => ({
            ...dataSourceOptions(config.database),
            migrationsRun: config.database.runMigrations,
            // Retries cover a database that is still starting; a broken migration will not heal.
            toRetry: (error: unknown) => !(error instanceof MigrationFailedError),
            verboseRetryLog: true,
          }),
          dataSourceFactory: openDataSource,
        }),
        repositories,
      ],
      providers: [...REPOSITORIES],
      exports: [repositories, ...REPOSITORIES],
    };
  }
}
