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
  /**
   * Only when its deployment spot-checks results (`verify`) and the task was drawn: the checked
   * machine, the verifier, and the verdict (`disagreed`: the verifier's output differed).
   */
  spot_check?: {
    state: string;
    machine_id: string;
    verifier_machine_id: string | null;
    result_sha256: string;
    verifier_sha256: string | null;
    reason: string | null;
    requested_at: string;
    checked_at: string | null;
  };
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

/** One step of `TaskStats.series`: tasks submitted, and attempts' final outcomes, in [at, at + step). */
export interface TaskActivityPoint {
  at: string;
  submitted: number;
  completed: number;
  /** Ended ERROR or TIMEOUT. */
  failed: number;
}

/** `GET /api/v1/tasks/stats[?deployment=&minutes=]`: the workspace's tasks now by state, and per minute over the window. */
export interface TaskStats {
  from: string;
  to: string;
  stepSeconds: number;
  deployment: string | null;
  /** Every task of the workspace (or deployment) by its current state. */
  states: Partial<Record<TaskState, number>>;
  /** Oldest first, one point per step, zeros included. */
  series: TaskActivityPoint[];
  /** Run time (started to ended, seconds) of the tasks that ended in the window; nulls when none did. */
  durationSeconds: { p50: number | null; p95: number | null; p99: number | null };
}
