// Callbacks due on ended tasks, claimed by one replica at a time.
import type { DataSource, EntityManager } from 'typeorm';
import { queryRows } from '../../query-rows.js';
import type { CallbackClaim, TaskWithDeployment } from './task-rows.js';
import { type Raw, TASK_COLUMNS, TASK_FROM, withSeq } from './task-sql.js';

/**
 * Claims up to `limit` due callbacks (FOR UPDATE SKIP LOCKED: replicas never claim the same
 * one) and holds them while `work` delivers them; its outcomes are written in the same
 * transaction, which commits when `work` returns.
 */
export async function claimCallbacksDue(db: DataSource, limit: number, work: (claim: CallbackClaim) => Promise<void>): Promise<void> {
  await db.transaction(async (tx: EntityManager) => {
    const runner = tx.queryRunner!;
    const rows = await queryRows<Raw<TaskWithDeployment>>(
      runner,
      `SELECT ${TASK_COLUMNS}, t.result FROM ${TASK_FROM}
       WHERE t.id IN (SELECT id FROM tasks WHERE callback_state = 'pending' AND callback_next_at <= now() ORDER BY callback_next_at LIMIT $1 FOR UPDATE SKIP LOCKED)`,
      [limit],
    );
    await work({
      tasks: rows.map((r) => withSeq<TaskWithDeployment>(r)),
      markDelivered: async (taskId, attempts) => {
        await runner.query(
          `UPDATE tasks SET callback_state = 'delivered', callback_attempts = $2, callback_next_at = NULL, callback_error = NULL WHERE id = $1`,
          [taskId, attempts],
        );
      },
      markAttemptFailed: async (taskId, attempts, retryInMs, error) => {
        // No retry: the delay is null, and so is callback_next_at. ($2 compared with a literal as
        // well as assigned to the varchar column made Postgres refuse the statement.)
        await runner.query(
          `UPDATE tasks SET callback_state = $2, callback_attempts = $3, callback_next_at = now() + $4 * interval '1 millisecond', callback_error = $5
           WHERE id = $1`,
          [taskId, retryInMs === null ? 'failed' : 'pending', attempts, retryInMs, error.slice(0, 1000)],
        );
      },
    });
  });
}
