import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { type TaskCompleted, type TaskFailed, type TaskStarted } from '#tern/contracts';
import { queryRows } from '#tern/persistence';
import { meteringTasksTotal } from '../metering-metrics.js';

/**
 * One row per task attempt. Like containers, the rules do not depend on the order events are
 * seen in: an attempt's outcome only moves running → failed → completed (a completion beats a
 * failure report of the same attempt, e.g. a timeout that raced the result), and two reports
 * of the same outcome merge to the longest duration and latest end.
 */
const FINISH = `
  INSERT INTO metered_tasks AS t (task_id, attempt, workspace_id, deployment_id, container_id, machine_id, outcome, cause, duration_ms, ended_at)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
  ON CONFLICT (task_id, attempt) DO UPDATE SET
    container_id = COALESCE(t.container_id, EXCLUDED.container_id),
    machine_id = COALESCE(t.machine_id, EXCLUDED.machine_id),
    outcome = CASE WHEN t.outcome = 'running' OR (t.outcome = 'failed' AND EXCLUDED.outcome = 'completed') THEN EXCLUDED.outcome ELSE t.outcome END,
    cause = CASE WHEN t.outcome = 'running' OR (t.outcome = 'failed' AND EXCLUDED.outcome = 'completed') THEN EXCLUDED.cause
                 WHEN t.outcome = EXCLUDED.outcome THEN LEAST(t.cause, EXCLUDED.cause) ELSE t.cause END,
    duration_ms = CASE WHEN t.outcome = 'running' OR (t.outcome = 'failed' AND EXCLUDED.outcome = 'completed') THEN EXCLUDED.duration_ms
                       WHEN t.outcome = EXCLUDED.outcome THEN GREATEST(t.duration_ms, EXCLUDED.duration_ms) ELSE t.duration_ms END,
    ended_at = CASE WHEN t.outcome = 'running' OR (t.outcome = 'failed' AND EXCLUDED.outcome = 'completed') THEN EXCLUDED.ended_at
                    WHEN t.outcome = EXCLUDED.outcome THEN GREATEST(t.ended_at, EXCLUDED.ended_at) ELSE t.ended_at END,
    updated_at = now()
  RETURNING (xmax = 0) AS inserted`;

@Injectable()
export class TaskLedger {
  constructor(private readonly dataSource: DataSource) {}

  async started(e: TaskStarted): Promise<void> {
    await this.query(
      `INSERT INTO metered_tasks AS t (task_id, attempt, workspace_id, deployment_id, container_id, machine_id, outcome, started_at)
       VALUES ($1, $2, $3, $4, $5, $6, 'running', $7)
       ON CONFLICT (task_id, attempt) DO UPDATE SET
         started_at = LEAST(t.started_at, EXCLUDED.started_at),
         container_id = COALESCE(t.container_id, EXCLUDED.container_id),
         machine_id = COALESCE(t.machine_id, EXCLUDED.machine_id),
         updated_at = now()`,
      [e.taskId, e.attempt, e.workspaceId, e.deploymentId, e.containerId, e.machineId, e.startedAt],
    );
  }

  async completed(e: TaskCompleted): Promise<void> {
    await this.finish([e.taskId, e.attempt, e.workspaceId, e.deploymentId, e.containerId, e.machineId, 'completed', null, e.durationMs, e.completedAt], 'completed');
  }

  async failed(e: TaskFailed): Promise<void> {
    await this.finish(
      [e.taskId, e.attempt, e.workspaceId, e.deploymentId, e.containerId ?? null, e.machineId ?? null, 'failed', e.cause, e.durationMs ?? null, e.failedAt],
      'failed',
    );
  }

  private async finish(params: unknown[], outcome: 'completed' | 'failed'): Promise<void> {
    await this.query(FINISH, params);
    meteringTasksTotal.inc({ outcome });
  }

  private async query(sql: string, params: unknown[]): Promise<void> {
    const runner = this.dataSource.createQueryRunner();
    try {
      await queryRows(runner, sql, params);
    } finally {
      await runner.release();
    }
  }
}
