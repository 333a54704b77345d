import type { ValueTransformer } from 'typeorm';

/**
 * node-postgres returns bigint and numeric as strings so that no precision is lost silently.
 * The values Tern keeps there (byte counts, Gbit/s) stay far below 2^53, so numbers are safe
 * and far nicer to work with. Done per column rather than with the driver's `parseInt8`,
 * which flips a process-wide pg default under every other user of pg.
 */
export const numberFromText: ValueTransformer = {
  to: (value: number | null | undefined) => value,
  from: (value: string | number | null) => (value === null ? null : Number(value)),
};
