import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { DeploymentState, TaskState } from '#tern/contracts';
import { type NewTask, newTaskValues, UNSENT_COLUMNS, type UnsentTask } from './tasks.repository.js';
import { TransactionalRepository } from './transactional.repository.js';

/** A deployment whose latest version has a schedule: its spec as stored at deploy (resolved, the submitted one beside). */
export interface ScheduledDeployment {
  deploymentId: string;
  workspaceId: string;
  name: string;
  version: number;
  state: DeploymentState;
  spec: Record<string, unknown>;
  lastTickAt: Date | null;
  lastTaskId: string | null;
  lastTaskState: TaskState | null;
}

/**
 * Schedules: the deployments that have one, and the claim per tick. A tick fires once because
 * its claim is the first insert of (deployment, tick time), made in the same transaction as the
 * task it fires: a replica either claimed the tick and saved its task, or did neither.
 */
@Injectable()
export class SchedulesRepository extends TransactionalRepository {
  // Declared so Nest sees the DataSource to inject (the base class's parameter types are not emitted here).
  constructor(db: DataSource) {
    super(db);
  }

  /** Deployments (not deleted) whose latest version has a schedule, with their last tick; of one workspace when given. */
  scheduled(workspaceId?: string): Promise<ScheduledDeployment[]> {
    return this.rows<ScheduledDeployment>(
      `SELECT d.id AS "deploymentId", d.workspace_id AS "workspaceId", d.name, v.version, d.state, v.spec,
              last.tick_at AS "lastTickAt", last.task_id AS "lastTaskId", t.state AS "lastTaskState"
       FROM deployments d
       JOIN deployment_versions v ON v.deployment_id = d.id AND v.version = d.latest_version
       LEFT JOIN LATERAL (SELECT tick_at, task_id FROM schedule_ticks s WHERE s.deployment_id = d.id ORDER BY tick_at DESC LIMIT 1) last ON true
       LEFT JOIN tasks t ON t.id = last.task_id
       WHERE d.state <> 'deleted' AND v.spec ? 'schedule' AND ($1::uuid IS NULL OR d.workspace_id = $1)
       ORDER BY d.name`,
      [workspaceId ?? null],
    );
  }

  /** Claims a tick and saves its PENDING task; undefined when another replica claimed it first. */
  async claim(deploymentId: string, tickAt: Date, task: NewTask): Promise<UnsentTask | undefined> {
    return this.transaction(async (tx) => {
      const claimed = await tx.rows(
        `INSERT INTO schedule_ticks (deployment_id, tick_at, task_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING task_id`,
        [deploymentId, tickAt, task.id],
      );
      if (!claimed.length) return undefined;
      const rows = await tx.rows<UnsentTask>(
        `INSERT INTO tasks (id, workspace_id, deployment_id, deployment_version, state, payload, max_retries, timeout_seconds, ttl_seconds, callback_url)
         VALUES ($1, $2, $3, $4, 'PENDING', $5, $6, $7, $8, $9) RETURNING ${UNSENT_COLUMNS}`,
        newTaskValues(task),
      );
      return rows[0];
    });
  }
}
