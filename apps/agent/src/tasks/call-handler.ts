import { type ClientRequest, request } from 'node:http';
import { REMOTE_TRACEBACK, RUNNER_BUNCHES_HEADER, TASK_RESULT_MAX_BYTES, type TaskFailureCause } from '#tern/contracts';
import { type Bunches, bunchesOf } from './bunches.js';
import type { ContainerEndpoint } from '../invoke/forward.js';

/** What one call of a task handler came to. */
export type HandlerOutcome =
  | { kind: 'ok'; json: Buffer }
  /** The handler failed; `types` are its error's class and those it derives from (runner's word), `status` the runner's answer. */
  | { kind: 'error'; message: string; types?: string[]; status?: number }
  /** The connection failed or broke: the container (or its worker) went away. */
  | { kind: 'gone'; message: string }
  | { kind: 'aborted' };

/**
 * POSTs a task's payload to the container's handler (`POST /` at its endpoint) and reads the whole
 * answer. Aborting the signal closes the connection, which the runner takes as "stop this
 * task" (it ends the worker process running it and starts a fresh one). `takesBunches` is told
 * which bunches the runner's answer says it takes (bunch-call.ts), when it takes any.
 */
export function callHandler(
  endpoint: ContainerEndpoint,
  taskId: string,
  attempt: number,
  payload: unknown,
  signal: AbortSignal,
  takesBunches?: (bunches: Bunches) => void,
): Promise<HandlerOutcome> {
  const body = Buffer.from(JSON.stringify(payload));
  return new Promise((resolve) => {
    if (signal.aborted) return resolve({ kind: 'aborted' });
    const req = taskRequest(endpoint, taskId, attempt, body);
    const onAbort = () => req.destroy();
    signal.addEventListener('abort', onAbort, { once: true });
    const finish = (o: HandlerOutcome) => {
      signal.removeEventListener('abort', onAbort);
      resolve(signal.aborted ? { kind: 'aborted' } : o);
    };
    req.on('error', (e) => finish({ kind: 'gone', message: e.message }));
    req.on('response', (res) => {
      const bunches = bunchesOf(res.headers[RUNNER_BUNCHES_HEADER]);
      if (bunches !== 'none') takesBunches?.(bunches);
      const parts: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > TASK_RESULT_MAX_BYTES) {
          res.destroy();
          finish({
            kind: 'error',
            message: `the handler's result is over the ${TASK_RESULT_MAX_BYTES / 1024 / 1024} MiB limit for task results: store large outputs elsewhere (a volume, a bucket) and return a reference`,
          });
          return;
        }
        parts.push(chunk);
      });
      res.on('error', (e) => finish({ kind: 'gone', message: e.message }));
      res.on('end', () => {
        const data = Buffer.concat(parts);
        if (res.statusCode === 200) return finish({ kind: 'ok', json: data.length ? data : Buffer.from('null') });
        finish({ kind: 'error', status: res.statusCode ?? 0, ...handlerError(res.statusCode ?? 0, data) });
      });
    });
    req.end(body);
  });
}

/** POST / of a task's call: a connection of its own, its body `body`, the task named in its headers. */
export function taskRequest({ host, port }: ContainerEndpoint, taskId: string, attempt: number, body: Buffer): ClientRequest {
  return request({
    host,
    port,
    method: 'POST',
    path: '/',
    // A connection per call, never a kept-alive one: the runner ends a worker whose task was
    // cancelled or timed out, and a pooled connection to it would fail the next call.
    agent: false,
    headers: {
      'content-type': 'application/json',
      'content-length': String(body.length),
      'x-tern-task-id': taskId,
      'x-tern-attempt': String(attempt),
    },
  });
}

/**
 * The runner answers a raised exception with 500 {"error", "type", "types", "traceback"} (a
 * tern.HTTPError with its own status and {"error"}); anything else is shown as it came. The
 * traceback is kept in the task's error, after REMOTE_TRACEBACK.
 */
export function handlerError(status: number, data: Buffer): { message: string; types?: string[] } {
  const text = data.toString('utf8');
  try {
    const parsed = JSON.parse(text) as { error?: unknown; type?: unknown; types?: unknown; traceback?: unknown };
    if (typeof parsed.error === 'string') {
      const type = typeof parsed.type === 'string' ? parsed.type : undefined;
      const said = status === 500 && type ? `${type}: ${parsed.error}` : status === 500 ? parsed.error : `${status} ${parsed.error}`;
      const trace = typeof parsed.traceback === 'string' && parsed.traceback ? `${REMOTE_TRACEBACK}${parsed.traceback}` : '';
      const types = Array.isArray(parsed.types) ? parsed.types.filter((t): t is string => typeof t === 'string') : type ? [type] : [];
      return { message: `${said}${trace}`, ...(types.length ? { types } : {}) };
    }
  } catch {
    // not JSON: shown raw below
  }
  return { message: `the handler answered ${status}${text ? `: ${text.slice(0, 500)}` : ''}` };
}

/**
 * Whether a handler's failure is one a retry cannot mend: a 4xx it answered on purpose
 * (tern.HTTPError), or an error of a type the task policy's no_retry_on names.
 */
export function failedForGood(outcome: HandlerOutcome, noRetryOn: readonly string[] = []): boolean {
  if (outcome.kind !== 'error') return false;
  if (outcome.status !== undefined && outcome.status >= 400 && outcome.status < 500) return true;
  return (outcome.types ?? []).some((t) => noRetryOn.includes(t));
}

/**
 * Why an attempt that did not return a result failed, and what to tell its caller; `stoppedContainer`:
 * the container's id when it was told to stop (a broken call is then the container lost, not the handler).
 */
export function failureOf(
  outcome: Exclude<HandlerOutcome, { kind: 'ok' }>,
  timeoutSeconds: number,
  stoppedContainer: string | false,
): [TaskFailureCause, string] {
  if (outcome.kind === 'aborted') return ['timeout', `ran longer than its timeout of ${timeoutSeconds} s`];
  if (outcome.kind === 'error') return ['error', outcome.message];
  return stoppedContainer
    ? ['container-lost', `container ${stoppedContainer} stopped while running it (${outcome.message})`]
    : ['error', `the handler's worker died while running it (${outcome.message})`];
}
