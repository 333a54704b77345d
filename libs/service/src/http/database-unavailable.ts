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

/**
 * Why `e` (or the driver error a QueryFailedError wraps) means Postgres could not be reached,
 * not that the query was wrong; undefined when it does not.
 */
export function databaseUnavailable(e: unknown): string | undefined {
  const inner = e instanceof QueryFailedError ? (e.driverError as unknown) : e;
  for (const err of [inner, e]) {
    // By shape, not instanceof: socket errors may come from another realm (a vm context, a worker).
    if (typeof err !== 'object' || err === null || typeof (err as Error).message !== 'string') continue;
    const { code, message } = err as Error & { code?: unknown };
    if (typeof code === 'string' && (SOCKET_CODES.has(code) || UNAVAILABLE_SQLSTATE.test(code))) return `${code}: ${message}`;
    if (DRIVER_MESSAGES.some((m) => m.test(message))) return message;
  }
  return undefined;
}
