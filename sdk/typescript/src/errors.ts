/**
 * What the gateway refused, by kind, each carrying the gateway's own message: callers catch the
 * kind they can act on (a missing deployment, a spec to fix) and show the message as it is.
 */
export class TernApiError extends Error {
  constructor(
    /** The HTTP status; 0 when the gateway could not be reached. */
    readonly status: number,
    message: string,
    /** The answer's body, parsed when it was JSON. */
    readonly body?: unknown,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** The gateway could not be reached at all. */
export class TernConnectionError extends TernApiError {}
/** 400, 413, 422: the request (a spec field, an input) is not valid; the message names what to fix. */
export class TernInvalidRequestError extends TernApiError {}
/** 401, 403: no token, a wrong one, or one without the right. */
export class TernAuthError extends TernApiError {}
/** 404: no such deployment, call, task, map or sandbox in this workspace. */
export class TernNotFoundError extends TernApiError {}
/** 409: the thing has already ended (a task, a map, a sandbox). */
export class TernConflictError extends TernApiError {}
/** 429, 503, 504: too much waiting, stopped, or no capacity now; worth trying again later. */
export class TernUnavailableError extends TernApiError {}

/** A call, task or map input that ran and failed: the handler's error as the gateway recorded it. */
export class TernRemoteError extends Error {
  constructor(
    message: string,
    /** The call or task id, or `<map id>#<index>` for a map input. */
    readonly id: string,
  ) {
    super(message);
    this.name = 'TernRemoteError';
  }
}

const KINDS: [number[], typeof TernApiError][] = [
  [[400, 413, 422], TernInvalidRequestError],
  [[401, 403], TernAuthError],
  [[404], TernNotFoundError],
  [[409], TernConflictError],
  [[429, 503, 504], TernUnavailableError],
];

/** The error of the right kind for a status. */
export function apiError(status: number, message: string, body?: unknown): TernApiError {
  const kind = KINDS.find(([statuses]) => statuses.includes(status))?.[1] ?? TernApiError;
  return new kind(status, message, body);
}
