import type { QueryRunner } from 'typeorm';

/**
 * Rows of a raw query, whatever its command: TypeORM's plain query() answers UPDATE …
 * RETURNING with [rows, count] but SELECT with rows, so ask for the structured result.
 */
export async function queryRows<T>(runner: QueryRunner, sql: string, parameters: unknown[] = []): Promise<T[]> {
  const result = await runner.query(sql, parameters, true);
  return (result.records ?? []) as T[];
}
