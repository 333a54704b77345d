// Tasks ended by the user or by time: cancels, a deleted queue's tasks, and the TTL sweep.
import type { DataSource } from 'typeorm';
import { queryRowsOn } from '../../query-rows.js';
import type { CancelledTask, EndedTask } from './task-rows.js';
import { CALLBACK_DUE, FINAL, type Raw, withSeq } from './task-sql.js';

/** Cancels a task of the workspace not yet final; undefined when it was final already (or is not there). */
export async function cancel(db: DataSource, taskId: string, workspaceId: string): Promise<CancelledTask | undefined> {
  const rows = await queryRowsOn<Raw<CancelledTask>>(
    db,
    `WITH before AS (SELECT id, state, machine_id, attempts FROM tasks WHERE id = $1 AND workspace_id = $2 AND state NOT IN ${FINAL} FOR UPDATE)
     UPDATE tasks t SET state = 'CANCELLED', error = 'cancelled by the user', ended_at = now(), ${CALLBACK_DUE}, updated_at = now()
     FROM before WHERE t.id = before.id
     RETURNING t.id, t.workspace_id AS "workspaceId", before.state AS was, before.machine_id AS "machineId", before.attempts, t.stream_seq AS "streamSeq", t.deployment_id AS "deploymentId", t.deployment_version AS version, t.ended_at AS "endedAt"`,
    [taskId, workspaceId],
  );
  return rows.length ? withSeq<CancelledTask>(rows[0]) : undefined;
}

/** Every task of the deployment not yet final becomes CANCELLED with the reason (rows locked in id order, as everywhere). */
export async function cancelAllOf(db: DataSource, deploymentId: string, reason: string): Promise<EndedTask[]> {
  const rows = await queryRowsOn<Raw<EndedTask>>(
    db,
    `UPDATE tasks SET state = 'CANCELLED', error = $2, ended_at = now(), ${CALLBACK_DUE}, updated_at = now()
     WHERE id IN (SELECT id FROM tasks WHERE deployment_id = $1 AND state NOT IN ${FINAL} ORDER BY id FOR UPDATE)
     RETURNING id, workspace_id AS "workspaceId", stream_seq AS "streamSeq", ended_at AS "endedAt"`,
    [deploymentId, reason],
  );
  return rows.map((r) => withSeq<EndedTask>(r));
}

/** Pending tasks past their ttl become EXPIRED, oldest first, rows other sweeps hold skipped. */
export async function expirePastTtl(db: DataSource, limit = 500): Promise<EndedTask[]> {
  const rows = await queryRowsOn<Raw<EndedTask>>(
    db,
    `UPDATE tasks SET state = 'EXPIRED', error = 'waited longer than its ttl of ' || ttl_seconds || ' s without starting', ended_at = now(), ${CALLBACK_DUE}, updated_at = now()
     WHERE id IN (SELECT id FROM tasks WHERE state = 'PENDING' AND ttl_seconds IS NOT NULL AND created_at + ttl_seconds * interval '1 second' < now()
                  ORDER BY created_at LIMIT $1 FOR UPDATE SKIP LOCKED)
     RETURNING id, workspace_id AS "workspaceId", stream_seq AS "streamSeq", ended_at AS "endedAt"`,
    [limit],
  );
  return rows.map((r) => withSeq<EndedTask>(r));
}
