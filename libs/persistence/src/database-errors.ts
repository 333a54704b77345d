import { QueryFailedError } from 'typeorm';

const UNIQUE_VIOLATION = '23505';

/**
 * True when a query failed on a unique constraint (optionally a given one, by the names the
 * migrations use, e.g. `uq_workspaces_name`), so callers can answer 409 or skip a duplicate
 * event instead of treating it as a crash.
 */
export function isUniqueViolation(error: unknown, constraint?: string): boolean {
  if (!(error instanceof QueryFailedError)) return false;
  const driverError = error.driverError as { code?: string; constraint?: string } | undefined;
  return driverError?.code === UNIQUE_VIOLATION && (constraint === undefined || driverError.constraint === constraint);
}
