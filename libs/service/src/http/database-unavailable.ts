import { QueryFailedError } from 'typeorm';

/** Socket errors of a connection to Postgres that could not be made or was lost. */
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

/**
 * SQLSTATEs of a server going away or not taking connections: class 08 (connection exception),
 * 57P01..57P03 (admin / crash shutdown, cannot connect now), 53300 (too many connections).
 */
const UNAVAILABLE_SQLSTATE = /^(08...|57P0[123]|53300)$/;

/** What node-postgres says when a pooled connection is lost or none comes in time. */
const DRIVER_MESSAGES = [
  /Connection terminated/i,
  /timeout exceeded when trying to connect/i,
  /Client has encountered a connection error/i,
];

/** The port a `postgres://` URL names (5432 when it names none); undefined for a URL that cannot be read. */
export function databasePort(url: string): number | undefined {
  try {
    return Number(new URL(url).port || 5432);
  } catch {
    return undefined;
  }
}

/**
 * Why `e` (or the driver error a QueryFailedError wraps) means Postgres could not be reached,
 * not that the query was wrong; undefined when it does not. A connect error names the port it
 * tried: given the database's, one that names another port (a registry, a runner a request
 * went to) is not the database's.
 */
export function databaseUnavailable(e: unknown, database?: { port?: number }): string | undefined {
  const inner = e instanceof QueryFailedError ? (e.driverError as unknown) : e;
  for (const err of [inner, e]) {
    // By shape, not instanceof: socket errors may come from another realm (a vm context, a worker).
    if (typeof err !== 'object' || err === null || typeof (err as Error).message !== 'string') continue;
    const { code, message, port } = err as Error & { code?: unknown; port?: unknown };
    if (typeof code === 'string' && SOCKET_CODES.has(code)) {
      if (typeof port === 'number' && database?.port !== undefined && port !== database.port) return undefined;
      return `${code}: ${message}`;
    }
    if (typeof code === 'string' && UNAVAILABLE_SQLSTATE.test(code)) return `${code}: ${message}`;
    if (DRIVER_MESSAGES.some((m) => m.test(message))) return message;
  }
  return undefined;
}
