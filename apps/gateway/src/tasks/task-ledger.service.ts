import { Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { FINAL_TASK_STATES, TASK_ENDED, TASK_FAILED, TASK_RESULT_INLINE_BYTES, type TaskCompleted, type TaskFailed, type TaskStarted, type TaskState } from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import { queryRowsOn } from '#tern/persistence';

const FINAL = `(${FINAL_TASK_STATES.map((s) => `'${s}'`).join(', ')})`;
/** On reaching a final state: a callback is due now when the task has a URL. */
const CALLBACK_DUE = `callback_state = CASE WHEN callback_url IS NULL THEN NULL ELSE 'pending' END, callback_next_at = CASE WHEN callback_url IS NULL THEN NULL ELSE now() END`;

/**
 * The task state machine in Postgres, fed by the agents' task events. Events may arrive twice
 * (at-least-once) and out of order (one consumer per subject), so every transition is one
 * conditional UPDATE: a final state is never left, the first completion wins (exactly one
 * result per task), and an attempt's event never overwrites a later attempt's.
 */
@Injectable()
export class TaskLedger {
  private readonly logger = new Logger('task-ledger');

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly messaging: Messaging,
  ) {}

  async started(e: TaskStarted): Promise<boolean> {
    const rows = await queryRowsOn<{ was: TaskState; was_attempt: number; was_machine: string | null; was_container: string | null }>(
      this.db,
      `WITH before AS (SELECT id, state, attempts, machine_id, container_id FROM tasks WHERE id = $1 FOR UPDATE)
       UPDATE tasks t SET state = 'RUNNING', attempts = $2, started_at = $3, container_id = $4, machine_id = $5, updated_at = now()
       FROM before WHERE t.id = before.id AND before.state NOT IN ${FINAL} AND before.attempts < $2
       RETURNING before.state AS was, before.attempts AS was_attempt, before.machine_id AS was_machine, before.container_id AS was_container`,
      [e.taskId, e.attempt, e.startedAt, e.containerId, e.machineId],
    );
    const before = rows[0];
    // The previous attempt was still running when this one began: its agent never reported, so
    // it was lost with its container or machine. Said once, naming that machine (reputation
    // counts it there); the agent's own report of it, if it came after all, has the same id.
    if (before?.was === 'RUNNING' && before.was_attempt === e.attempt - 1 && before.was_machine) {
      await this.messaging
        .publish(
          TASK_FAILED,
          {
            taskId: e.taskId,
            deploymentId: e.deploymentId,
            ...(e.deploymentVersion ? { deploymentVersion: e.deploymentVersion } : {}),
            workspaceId: e.workspaceId,
            machineId: before.was_machine,
            ...(before.was_container ? { containerId: before.was_container } : {}),
            attempt: before.was_attempt,
            cause: 'container-lost',
            error: `attempt ${before.was_attempt} never reported: its container or machine was lost; running it again`,
            willRetry: true,
            failedAt: e.startedAt,
          },
          { msgId: `${e.taskId}:failed:${before.was_attempt}` },
        )
        .catch((err: Error) => this.logger.warn({ taskId: e.taskId, err: err.message }, 'could not report a lost attempt'));
    }
    return rows.length > 0;
  }

  async failed(e: TaskFailed): Promise<boolean> {
    const error = e.cause === 'error' ? e.error : `${e.cause}: ${e.error}`;
    if (e.willRetry) {
      const rows = await queryRowsOn(this.db, 
        `UPDATE tasks SET state = 'RETRY', attempts = GREATEST(attempts, $2), error = $3, updated_at = now()
         WHERE id = $1 AND state NOT IN ${FINAL} AND attempts <= $2 RETURNING id`,
        [e.taskId, e.attempt, error],
      );
      return rows.length > 0;
    }
    const state: TaskState = e.cause === 'timeout' ? 'TIMEOUT' : 'ERROR';
    const rows = await queryRowsOn(this.db, 
      `UPDATE tasks SET state = $2, attempts = GREATEST(attempts, $3), error = $4, ended_at = $5,
         container_id = COALESCE($6, container_id), machine_id = COALESCE($7, machine_id), ${CALLBACK_DUE}, updated_at = now()
       WHERE id = $1 AND state NOT IN ${FINAL} RETURNING id`,
      [e.taskId, state, e.attempt, error, e.failedAt, e.containerId ?? null, e.machineId ?? null],
    );
    return this.ended(rows, e.taskId, state, e.failedAt);
  }

  async completed(e: TaskCompleted): Promise<boolean> {
    const inline = e.resultRef ? null : e.result === undefined ? null : JSON.stringify(e.result);
    if (inline && Buffer.byteLength(inline) > TASK_RESULT_INLINE_BYTES) this.logger.warn({ taskId: e.taskId }, 'a large result arrived inline');
    const rows = await queryRowsOn(this.db, 
      `UPDATE tasks SET state = 'COMPLETE', result = $2::jsonb, result_ref = $3, attempts = GREATEST(attempts, $4), ended_at = $5,
         started_at = CASE WHEN attempts <= $4 THEN $8 ELSE started_at END,
         container_id = $6, machine_id = $7, error = NULL, ${CALLBACK_DUE}, updated_at = now()
       WHERE id = $1 AND state NOT IN ${FINAL} RETURNING id`,
      // Its start from its duration: task.started may arrive after task.completed (one consumer per subject).
      [e.taskId, inline, e.resultRef ?? null, e.attempt, e.completedAt, e.containerId, e.machineId, new Date(Date.parse(e.completedAt) - e.durationMs).toISOString()],
    );
    return this.ended(rows, e.taskId, 'COMPLETE', e.completedAt);
  }

  /**
   * Cancels a task not yet final. Returns the state it was in (RUNNING means an agent must stop
   * it) and where its message sits, or undefined when it was final already.
   */
  async cancel(taskId: string, workspaceId: string): Promise<{ was: TaskState; streamSeq: number | null; deploymentId: string; version: number } | undefined> {
    const rows = await queryRowsOn<{ was: TaskState; stream_seq: string | null; deployment_id: string; deployment_version: number; ended_at: Date }>(this.db, 
      `WITH before AS (SELECT id, state FROM tasks WHERE id = $1 AND workspace_id = $2 AND state NOT IN ${FINAL} FOR UPDATE)
       UPDATE tasks t SET state = 'CANCELLED', error = 'cancelled by the user', ended_at = now(), ${CALLBACK_DUE}, updated_at = now()
       FROM before WHERE t.id = before.id
       RETURNING before.state AS was, t.stream_seq, t.deployment_id, t.deployment_version, t.ended_at`,
      [taskId, workspaceId],
    );
    if (!rows.length) return undefined;
    const r = rows[0];
    this.announce(taskId, 'CANCELLED', r.ended_at.toISOString());
    return { was: r.was, streamSeq: r.stream_seq === null ? null : Number(r.stream_seq), deploymentId: r.deployment_id, version: r.deployment_version };
  }

  /** Every task of a deleted task queue not yet ended becomes CANCELLED; returns how many. */
  async cancelAllOf(deploymentId: string, reason: string): Promise<number> {
    const rows = await queryRowsOn<{ id: string; ended_at: Date }>(
      this.db,
      `UPDATE tasks SET state = 'CANCELLED', error = $2, ended_at = now(), ${CALLBACK_DUE}, updated_at = now()
       WHERE deployment_id = $1 AND state NOT IN ${FINAL} RETURNING id, ended_at`,
      [deploymentId, reason],
    );
    for (const r of rows) this.announce(r.id, 'CANCELLED', r.ended_at.toISOString());
    return rows.length;
  }

  /** Pending tasks past their ttl become EXPIRED; returns where their messages sit. */
  async expire(limit = 500): Promise<{ id: string; streamSeq: number | null }[]> {
    const rows = await queryRowsOn<{ id: string; stream_seq: string | null; ended_at: Date }>(this.db, 
      `UPDATE tasks SET state = 'EXPIRED', error = 'waited longer than its ttl of ' || ttl_seconds || ' s without starting', ended_at = now(), ${CALLBACK_DUE}, updated_at = now()
       WHERE id IN (SELECT id FROM tasks WHERE state = 'PENDING' AND ttl_seconds IS NOT NULL AND created_at + ttl_seconds * interval '1 second' < now()
                    ORDER BY created_at LIMIT $1 FOR UPDATE SKIP LOCKED)
       RETURNING id, stream_seq, ended_at`,
      [limit],
    );
    for (const r of rows) this.announce(r.id, 'EXPIRED', r.ended_at.toISOString());
    return rows.map((r) => ({ id: r.id, streamSeq: r.stream_seq === null ? null : Number(r.stream_seq) }));
  }

  private ended(rows: unknown[], taskId: string, state: TaskState, at: string): boolean {
    if (!rows.length) return false;
    this.announce(taskId, state, at);
    return true;
  }

  /** Tells every gateway replica's waiters (core NATS; a lost one is caught by their re-read). */
  private announce(taskId: string, state: TaskState, endedAt: string) {
    this.messaging.emit(TASK_ENDED, { taskId, state, endedAt });
  }
}
