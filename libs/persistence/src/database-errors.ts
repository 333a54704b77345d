import { QueryFailedError } from 'typeorm';

const UNIQUE_VIOLATION = '23505';
const FOREIGN_KEY_VIOLATION = '23503';

/**
 * True when a query failed on a unique constraint (optionally a given one, by the names the
 * migrations use, e.g. `uq_workspaces_name`), so callers can answer 409 or skip a duplicate
 * event instead of treating it as a crash.
 */
export function isUniqueViolation(error: unknown, constraint?: string): boolean {
  return violates(error, UNIQUE_VIOLATION, constraint);
}

/** True when a query failed on a foreign key (optionally a given one): a row still refers to what it changed. */
export function isForeignKeyViolation(error: unknown, constraint?: string): boolean {
  return violates(error, FOREIGN_KEY_VIOLATION, constraint);
}

function violates(error: unknown, code: string, constraint?: string): boolean {
  if (!(error instanceof QueryFailedError)) return false;
  const driverError = error.driverError as { code?: string; constraint?: string } | undefined;
  return driverError?.code === code && (constraint === undefined || driverError.constraint === constraint);
}

/**
 * SQLSTATEs Postgres raises for a value it will not take, which came from the request when
 * it reaches a query: invalid text for a type (a uuid, a number, a date), bytes that are not
 * UTF-8 or a NUL, a value longer than its column, a number out of range.
 */
const BAD_INPUT_CODES: Readonly<Record<string, string>> = {
  '22P02': 'invalid text for its type',
  '22021': 'bytes that are not valid UTF-8',
  '22P05': 'a NUL character',
  '22001': 'a value too long for its field',
  '22003': 'a number out of range',
  '22007': 'an invalid date or time',
  '22008': 'a date or time out of range',
};

/**
 * What was wrong with the input when a query failed on a value rather than on the server (for
 * a 400 that says so), or undefined for any other failure, which stays a server error.
 */
export function badInputOf(error: unknown): string | undefined {
  if (!(error instanceof QueryFailedError)) return undefined;
  const driverError = error.driverError as { code?: string; message?: string } | undefined;
  const kind = driverError?.code === undefined ? undefined : BAD_INPUT_CODES[driverError.code];
  return kind && `the request holds ${kind} (${driverError?.message ?? driverError?.code}); fix that value`;
}
