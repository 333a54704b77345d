import type { TaskState } from '../domain.js';

/** `GET /api/v1/tasks/<id>` (also `…/wait` and `DELETE`): one task, snake_case like beta9's. */
export interface TaskView {
  task_id: string;
  deployment: string;
  version: number;
  status: TaskState;
  done: boolean;
  attempts: number;
  max_retries: number;
  timeout: number;
  ttl: number | null;
  created_at: string;
  started_at: string | null;
  ended_at: string | null;
  /** Only in the one-task answers, once the task has a result. */
  result?: unknown;
  error: string | null;
  container_id: string | null;
  machine_id: string | null;
  /** Only when the task was submitted with a callback_url. */
  /** `error`: why the last attempt failed (an answer, or an address callbacks may not reach); null once delivered. */
  callback?: { url: string; state: string | null; attempts: number; error: string | null };
}

/** `GET /api/v1/tasks`: newest first, `next_cursor` for the next page. */
export interface TaskList {
  tasks: TaskView[];
  next_cursor: string | null;
}

/** `POST /taskqueue/<name>[/v<N>]` (body: the task's JSON payload). */
export interface SubmittedTask {
  task_id: string;
  status: 'PENDING';
  deployment: string;
  version: number;
}
