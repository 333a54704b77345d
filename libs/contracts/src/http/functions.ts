import type { TaskState } from '../domain.js';

/**
 * `POST /function/<name>[/v<N>]` (200 when the call ended within `wait`, else 202),
 * `GET /api/v1/calls/<id>` and `…/wait`: one call of a function.
 */
export interface CallView {
  call_id: string;
  function: string;
  version: number;
  status: TaskState;
  done: boolean;
  /** Only once the call is COMPLETE. */
  result?: unknown;
  error: string | null;
  attempts: number;
  created_at: string;
  started_at: string | null;
  ended_at: string | null;
}
