import type { TaskState } from '#tern/contracts';
import type { Task } from '../../entities/task.entity.js';

/** A task as the task API shows it: its row and its deployment's name; `result` only when asked for. */
export type TaskWithDeployment = Pick<
  Task,
  | 'id'
  | 'workspaceId'
  | 'deploymentId'
  | 'version'
  | 'state'
  | 'result'
  | 'resultRef'
  | 'error'
  | 'attempts'
  | 'maxRetries'
  | 'timeoutSeconds'
  | 'ttlSeconds'
  | 'callbackUrl'
  | 'callbackState'
  | 'callbackAttempts'
  | 'callbackError'
  | 'containerId'
  | 'machineId'
  | 'spotCheck'
  | 'streamSeq'
  | 'createdAt'
  | 'startedAt'
  | 'endedAt'
  | 'updatedAt'
> & { deploymentName: string };

/** What a task is published to TASKS from: by the submit, and by the relay for one saved but never sent. */
export type UnsentTask = Pick<
  Task,
  'id' | 'workspaceId' | 'deploymentId' | 'version' | 'maxRetries' | 'timeoutSeconds' | 'ttlSeconds' | 'callbackUrl' | 'createdAt'
> & {
  payload: unknown;
};

/** A task to accept: its id is chosen by the caller (it becomes the TASKS message id). */
export type NewTask = Omit<UnsentTask, 'createdAt'>;

/** The row before an attempt's start was recorded: the attempt it replaced may have been lost. */
export interface StartedOver {
  was: TaskState;
  wasAttempt: number;
  wasMachine: string | null;
  wasContainer: string | null;
  /** When the attempt before was seen to start. */
  wasStartedAt: Date | null;
  workspaceId: string;
  deploymentId: string;
}

/** The attempt an outcome settled, as the tasks table knows it (never as the reporter says). */
export interface SettledAttempt {
  workspaceId: string;
  deploymentId: string;
  machineId: string | null;
  containerId: string | null;
  /** When the attempt was seen to start (its lease); null when it never was. */
  startedAt: Date | null;
}

/** An attempt's start as the gateway records it (startedAt: when the event reached NATS). */
export interface StartedAttempt {
  taskId: string;
  attempt: number;
  startedAt: string;
  containerId: string;
  machineId: string;
}

/** An attempt's result: inline JSON text, or where it was put. */
export interface Completion {
  taskId: string;
  resultJson: string | null;
  resultRef: string | null;
  attempt: number;
  completedAt: string;
  containerId: string;
  machineId: string;
}

/** An attempt's start and result recorded in one: the task as it now is, and the row as it was before the start. */
export interface StartedCompletion {
  task: TaskWithDeployment;
  before: StartedOver;
}

/** A task just made final by a sweep or a cancel: where its TASKS message sits (null: never published). */
export interface EndedTask {
  id: string;
  workspaceId: string;
  streamSeq: number | null;
  endedAt: Date;
}

export interface CancelledTask extends EndedTask {
  /** The state it was in: RUNNING means an agent must stop it. */
  was: TaskState;
  /** The machine holding the lease of its last started attempt, told to stop it (null: never started). */
  machineId: string | null;
  attempts: number;
  deploymentId: string;
  version: number;
}

export interface TaskListFilter {
  deploymentName?: string;
  states?: TaskState[];
  /** Keyset: only tasks older than this one (newest first). */
  before?: { createdAt: string; id: string };
}

/** Due callbacks claimed in one transaction; each outcome is recorded in it before the claim ends. */
export interface CallbackClaim {
  tasks: TaskWithDeployment[];
  markDelivered(taskId: string, attempts: number): Promise<void>;
  /** retryInMs null: gave up (callback_state failed); `error` says what went wrong, shown with the task. */
  markAttemptFailed(taskId: string, attempts: number, retryInMs: number | null, error: string): Promise<void>;
}

/** One row of TasksRepository.activity: a count of tasks submitted or ended in the step at `at`, or now in `state`. */
export interface TaskActivityRow {
  kind: 'submitted' | 'ended' | 'now';
  at: Date | null;
  state: TaskState | null;
  count: number;
}
