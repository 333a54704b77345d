import type { CallView, SubmittedTask, TaskView } from '../../../libs/contracts/src/index.js';
import { TernRemoteError } from './errors.js';
import { type Input, type TernHttp } from './http.js';

/** Seconds one long poll holds open: under the transport's 30 s request timeout; longer waits poll again. */
export const WAIT_PER_REQUEST = 25;

/** Per call (or task) overrides of the deployment's task policy, in seconds. */
export interface TaskOverrides {
  max_retries?: number;
  timeout?: number;
  ttl?: number;
  callback_url?: string;
}

/**
 * `/function/<name>`, `/taskqueue/<name>` with an optional `/v<N>` pin; `/endpoint/<name>` with an
 * optional `@<N>` (after an endpoint's name comes the server's own path, which may be `/v1`).
 */
export function routeOf(prefix: 'function' | 'taskqueue' | 'endpoint', name: string, version?: number): string {
  const pin = version ? (prefix === 'endpoint' ? `@${version}` : `/v${version}`) : '';
  return `/${prefix}/${encodeURIComponent(name)}${pin}`;
}

export function queryOf(values: Record<string, string | number | boolean | undefined>): string {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(values)) if (v !== undefined) query.set(k, String(v));
  const text = query.toString();
  return text ? `?${text}` : '';
}

/** Polls a `…/wait` long poll until `done` or until `timeoutSeconds` pass; answers the last view. */
export async function waitUntilDone<V extends { done: boolean }>(
  http: TernHttp,
  waitPath: string,
  view: V,
  timeoutSeconds: number,
): Promise<V> {
  const deadline = Date.now() + timeoutSeconds * 1000;
  let last = view;
  while (!last.done && Date.now() < deadline) {
    const left = Math.max(1, Math.ceil((deadline - Date.now()) / 1000));
    last = (await http.get<V>(`${waitPath}/wait?timeout=${Math.min(WAIT_PER_REQUEST, left)}`)).body;
  }
  return last;
}

/** A call of a function: POST /function/<name>, then GET /api/v1/calls/<id>[/wait]. */
export class FunctionCalls {
  constructor(private readonly http: TernHttp) {}

  /** Starts a call and answers at once (`wait=0`) or once it ends within `waitSeconds`. */
  async spawn(name: string, input: Input, options: TaskOverrides & { version?: number; waitSeconds?: number } = {}): Promise<CallView> {
    const { version, waitSeconds = 0, ...overrides } = options;
    const path = `${routeOf('function', name, version)}${queryOf({ ...overrides, wait: waitSeconds })}`;
    return (await this.http.request<CallView>('POST', path, input)).body;
  }

  /** The call as it is now, or once it ends within `timeoutSeconds`. */
  async wait(callId: string, timeoutSeconds = 3600, view?: CallView): Promise<CallView> {
    const path = `/api/v1/calls/${encodeURIComponent(callId)}`;
    return waitUntilDone(this.http, path, view ?? (await this.http.get<CallView>(path)).body, timeoutSeconds);
  }

  /** One call, its result; a failed call is a TernRemoteError with the handler's error, one still running after `timeoutSeconds` too. */
  async run<T = unknown>(
    name: string,
    input: Input,
    options: TaskOverrides & { version?: number; timeoutSeconds?: number } = {},
  ): Promise<T> {
    const { timeoutSeconds = 3600, ...rest } = options;
    const started = await this.spawn(name, input, { ...rest, waitSeconds: Math.min(WAIT_PER_REQUEST, timeoutSeconds) });
    return resultOf<T>(await this.wait(started.call_id, timeoutSeconds, started), started.call_id);
  }
}

/** Tasks of a task queue: POST /taskqueue/<name>, then GET /api/v1/tasks/<id>[/wait]. */
export class Tasks {
  constructor(private readonly http: TernHttp) {}

  async put(name: string, input: Input, options: TaskOverrides & { version?: number } = {}): Promise<SubmittedTask> {
    const { version, ...overrides } = options;
    return (await this.http.request<SubmittedTask>('POST', `${routeOf('taskqueue', name, version)}${queryOf({ ...overrides })}`, input))
      .body;
  }

  async get(taskId: string): Promise<TaskView> {
    return (await this.http.get<TaskView>(`/api/v1/tasks/${encodeURIComponent(taskId)}`)).body;
  }

  /** The task once it ends, or as it is after `timeoutSeconds`. */
  async wait(taskId: string, timeoutSeconds = 3600): Promise<TaskView> {
    return waitUntilDone(this.http, `/api/v1/tasks/${encodeURIComponent(taskId)}`, await this.get(taskId), timeoutSeconds);
  }

  /** The task's result once it ends; a failed (or unfinished) task is a TernRemoteError. */
  async result<T = unknown>(taskId: string, timeoutSeconds = 3600): Promise<T> {
    return resultOf<T>(await this.wait(taskId, timeoutSeconds), taskId);
  }

  async cancel(taskId: string): Promise<TaskView> {
    return (await this.http.request<TaskView>('DELETE', `/api/v1/tasks/${encodeURIComponent(taskId)}`)).body;
  }
}

/** A finished call's or task's result, or its error raised. */
export function resultOf<T>(view: { done: boolean; status: string; result?: unknown; error: string | null }, id: string): T {
  if (!view.done) throw new TernRemoteError(`${id} is still ${view.status}`, id);
  if (view.status !== 'COMPLETE') throw new TernRemoteError(`${id} ${view.status}: ${view.error ?? 'no error recorded'}`, id);
  return view.result as T;
}
