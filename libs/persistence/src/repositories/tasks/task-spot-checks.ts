// A completed task's spot check (libs/contracts task-spot-check.ts), kept in tasks.spot_check.
import type { DataSource } from 'typeorm';
import type { TaskSpotCheckRecord } from '#tern/contracts';
import { queryRowsOn } from '../../query-rows.js';

/** A spot check with the task's owners, as the gateway settles it. */
export interface SpotCheckOfTask {
  workspaceId: string;
  deploymentId: string;
  spotCheck: TaskSpotCheckRecord | null;
}

/**
 * Records a COMPLETE task's spot check once (a repeated completion changes nothing); answers the
 * task's input to run it with, or undefined when it had one already.
 */
export async function beginSpotCheck(
  db: DataSource,
  taskId: string,
  check: TaskSpotCheckRecord,
): Promise<{ payload: Record<string, unknown> } | undefined> {
  const [row] = await queryRowsOn<{ payload: Record<string, unknown> }>(
    db,
    `UPDATE tasks SET spot_check = $2::jsonb WHERE id = $1 AND state = 'COMPLETE' AND spot_check IS NULL RETURNING payload`,
    [taskId, JSON.stringify(check)],
  );
  return row;
}

/**
 * Settles a pending check with `change`, believed only from the verifier it names (machine and
 * container); answers the check as it now is, or undefined when nothing changed.
 */
export async function settleSpotCheck(
  db: DataSource,
  taskId: string,
  verifier: { machineId: string; containerId: string },
  change: Pick<TaskSpotCheckRecord, 'state' | 'verifierSha256' | 'reason' | 'checkedAt'>,
): Promise<SpotCheckOfTask | undefined> {
  const [row] = await queryRowsOn<SpotCheckOfTask>(
    db,
    `UPDATE tasks SET spot_check = spot_check || $4::jsonb
     WHERE id = $1 AND spot_check->>'state' = 'pending' AND spot_check->>'verifierMachineId' = $2 AND spot_check->>'verifierContainerId' = $3
     RETURNING workspace_id AS "workspaceId", deployment_id AS "deploymentId", spot_check AS "spotCheck"`,
    [taskId, verifier.machineId, verifier.containerId, JSON.stringify(change)],
  );
  return row;
}

export async function spotCheckOf(db: DataSource, taskId: string): Promise<SpotCheckOfTask | undefined> {
  const [row] = await queryRowsOn<SpotCheckOfTask>(
    db,
    `SELECT workspace_id AS "workspaceId", deployment_id AS "deploymentId", spot_check AS "spotCheck" FROM tasks WHERE id = $1`,
    [taskId],
  );
  return row;
}

/** A check still waiting on its verifier, with what its deadline is reckoned from. */
export interface PendingSpotCheck {
  taskId: string;
  timeoutSeconds: number;
  spotCheck: TaskSpotCheckRecord;
}

/**
 * The oldest checks still pending (at most `limit`), read through the partial index on pending
 * checks so the sweep never scans the tasks table.
 */
export async function pendingSpotChecks(db: DataSource, limit: number): Promise<PendingSpotCheck[]> {
  return queryRowsOn<PendingSpotCheck>(
    db,
    `SELECT id AS "taskId", timeout_seconds AS "timeoutSeconds", spot_check AS "spotCheck" FROM tasks
     WHERE spot_check->>'state' = 'pending' ORDER BY ended_at LIMIT $1`,
    [limit],
  );
}
