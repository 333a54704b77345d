import type { DataSource, QueryRunner } from 'typeorm';

/**
 * Rows of a raw query, whatever its command: TypeORM's plain query() answers UPDATE …
 * RETURNING with [rows, count] but SELECT with rows, so ask for the structured result.
 */
export async function queryRows<T>(runner: QueryRunner, sql: string, parameters: unknown[] = []): Promise<T[]> {
  const result = await runner.query(sql, parameters, true);
  return (result.records ?? []) as T[];
}

/** queryRows on a connection of its own from the pool, for services that hold a DataSource. */
export async function queryRowsOn<T>(db: DataSource, sql: string, parameters: unknown[] = []): Promise<T[]> {
  const runner = db.createQueryRunner();
  try {
    return await queryRows<T>(runner, sql, parameters);
  } finally {
    await runner.release();
  }
}
