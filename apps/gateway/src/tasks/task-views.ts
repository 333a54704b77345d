import type { TaskSpotCheckRecord, TaskView } from '#tern/contracts';
import type { TaskWithDeployment } from '#tern/persistence';
import { isFinal } from '#tern/tasks';

export type { TaskView } from '#tern/contracts';

/** What GET /api/v1/tasks/<id> answers; `result` only when asked for (the one-task view). */
export function taskView(task: TaskWithDeployment, result?: { value: unknown }): TaskView {
  return {
    task_id: task.id,
    deployment: task.deploymentName,
    version: task.version,
    status: task.state,
    done: isFinal(task.state),
    attempts: task.attempts,
    max_retries: task.maxRetries,
    timeout: task.timeoutSeconds,
    ttl: task.ttlSeconds,
    created_at: task.createdAt.toISOString(),
    started_at: task.startedAt?.toISOString() ?? null,
    ended_at: task.endedAt?.toISOString() ?? null,
    ...(result ? { result: result.value } : {}),
    error: task.error,
    container_id: task.containerId,
    machine_id: task.machineId,
    ...(task.callbackUrl
      ? { callback: { url: task.callbackUrl, state: task.callbackState, attempts: task.callbackAttempts, error: task.callbackError } }
      : {}),
    ...(task.spotCheck ? { spot_check: spotCheckView(task.spotCheck) } : {}),
  };
}

function spotCheckView(c: TaskSpotCheckRecord): NonNullable<TaskView['spot_check']> {
  return {
    state: c.state,
    machine_id: c.machineId,
    verifier_machine_id: c.verifierMachineId ?? null,
    result_sha256: c.resultSha256,
    verifier_sha256: c.verifierSha256 ?? null,
    reason: c.reason ?? null,
    requested_at: c.requestedAt,
    checked_at: c.checkedAt ?? null,
  };
}

/** Keyset cursor over (created_at, id), newest first. */
export function encodeCursor(task: Pick<TaskWithDeployment, 'createdAt' | 'id'>): string {
  return Buffer.from(`${task.createdAt.toISOString()}|${task.id}`).toString('base64url');
}

export function decodeCursor(cursor: string): { createdAt: string; id: string } | undefined {
  const [createdAt, id] = Buffer.from(cursor, 'base64url').toString().split('|');
  if (!createdAt || !id || Number.isNaN(Date.parse(createdAt))) return undefined;
  return { createdAt, id };
}
