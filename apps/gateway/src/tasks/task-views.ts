import { type Conforms, FINAL_TASK_STATES, type SameType, type SubmittedTask, type TaskList, type TaskState, type TaskView } from '#tern/contracts';
import type { SubmittedTask as Submitted } from './task-submission.service.js';
import type { TasksService } from './tasks.service.js';

export type { TaskView } from '#tern/contracts';

/** The columns the task API reads (snake_case, straight from SQL). */
export interface TaskRow {
  id: string;
  workspace_id: string;
  deployment_id: string;
  deployment_name: string;
  deployment_version: number;
  state: TaskState;
  payload?: unknown;
  result?: unknown;
  result_ref: string | null;
  error: string | null;
  attempts: number;
  max_retries: number;
  timeout_seconds: number;
  ttl_seconds: number | null;
  callback_url: string | null;
  callback_state: string | null;
  callback_attempts: number;
  container_id: string | null;
  machine_id: string | null;
  stream_seq: string | null;
  created_at: Date;
  started_at: Date | null;
  ended_at: Date | null;
  updated_at: Date;
}

export const TASK_COLUMNS = `t.id, t.workspace_id, t.deployment_id, d.name AS deployment_name, t.deployment_version, t.state,
  t.result_ref, t.error, t.attempts, t.max_retries, t.timeout_seconds, t.ttl_seconds, t.callback_url, t.callback_state,
  t.callback_attempts, t.container_id, t.machine_id, t.stream_seq, t.created_at, t.started_at, t.ended_at, t.updated_at`;

export const TASK_FROM = `tasks t JOIN deployments d ON d.id = t.deployment_id`;

export function isFinal(state: TaskState): boolean {
  return FINAL_TASK_STATES.includes(state);
}

/** What GET /api/v1/tasks/<id> answers; `result` only when asked for (the one-task view). */
export function taskView(row: TaskRow, result?: { value: unknown }): TaskView {
  return {
    task_id: row.id,
    deployment: row.deployment_name,
    version: row.deployment_version,
    status: row.state,
    done: isFinal(row.state),
    attempts: row.attempts,
    max_retries: row.max_retries,
    timeout: row.timeout_seconds,
    ttl: row.ttl_seconds,
    created_at: row.created_at.toISOString(),
    started_at: row.started_at?.toISOString() ?? null,
    ended_at: row.ended_at?.toISOString() ?? null,
    ...(result ? { result: result.value } : {}),
    error: row.error,
    container_id: row.container_id,
    machine_id: row.machine_id,
    ...(row.callback_url ? { callback: { url: row.callback_url, state: row.callback_state, attempts: row.callback_attempts } } : {}),
  };
}

/** The answers built outside this file, held to their contracts (shared with the CLI). */
export type TaskAnswersConform = [Conforms<SameType<Awaited<ReturnType<TasksService['list']>>, TaskList>>, Conforms<SameType<Submitted, SubmittedTask>>];

/** Keyset cursor over (created_at, id), newest first. */
export function encodeCursor(row: Pick<TaskRow, 'created_at' | 'id'>): string {
  return Buffer.from(`${row.created_at.toISOString()}|${row.id}`).toString('base64url');
}

export function decodeCursor(cursor: string): { createdAt: string; id: string } | undefined {
  const [createdAt, id] = Buffer.from(cursor, 'base64url').toString().split('|');
  if (!createdAt || !id || Number.isNaN(Date.parse(createdAt))) return undefined;
  return { createdAt, id };
}
