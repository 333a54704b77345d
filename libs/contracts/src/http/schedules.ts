import type { TaskState } from '../domain.js';

/** `GET /api/v1/schedules`: the workspace's scheduled functions and task queues. */
export interface ScheduleView {
  deployment: string;
  version: number;
  /** The cron expression, or `every <n>s`. */
  expression: string;
  timezone: string;
  catch_up: 'none' | 'latest';
  /** paused while the deployment is stopped. */
  status: 'active' | 'paused';
  next_run: string | null;
  last_run: string | null;
  /** The state of the last run's task. */
  last_status: TaskState | null;
  last_task_id: string | null;
}
