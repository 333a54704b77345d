import type { TickLogger } from './ticker.js';

/**
 * Starts work whose result nobody waits for (a callback from a timer or an event emitter) and
 * logs its failure instead of leaving an unhandled rejection. The one place a promise is left
 * floating on purpose; `what` names the work in the log line.
 */
export function fireAndForget(what: string, logger: TickLogger, work: Promise<unknown> | (() => Promise<unknown>)): void {
  const promise = typeof work === 'function' ? Promise.resolve().then(work) : work;
  promise.catch((error: unknown) => logger.warn(`${what} failed: ${error instanceof Error ? error.message : String(error)}`));
}
