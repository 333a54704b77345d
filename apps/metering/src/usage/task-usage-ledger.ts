import { Injectable } from '@nestjs/common';
import { type TaskCompleted, type TaskFailed, type TaskStarted } from '#tern/contracts';
import { UsageRepository } from '#tern/persistence';
import { meteringTasksTotal } from '../metering-metrics.js';

/**
 * One row per task attempt. Like containers, the rules do not depend on the order events are
 * seen in (see UsageRepository.recordTaskFinished).
 */
@Injectable()
export class TaskUsageLedger {
  constructor(private readonly usage: UsageRepository) {}

  async started(e: TaskStarted): Promise<void> {
    await this.usage.recordTaskStarted(
      {
        taskId: e.taskId,
        attempt: e.attempt,
        workspaceId: e.workspaceId,
        deploymentId: e.deploymentId,
        containerId: e.containerId,
        machineId: e.machineId,
      },
      e.startedAt,
    );
  }

  async completed(e: TaskCompleted): Promise<void> {
    const attempt = {
      taskId: e.taskId,
      attempt: e.attempt,
      workspaceId: e.workspaceId,
      deploymentId: e.deploymentId,
      containerId: e.containerId,
      machineId: e.machineId,
    };
    await this.usage.recordTaskFinished(attempt, { outcome: 'completed', cause: null, durationMs: e.durationMs, endedAt: e.completedAt });
    meteringTasksTotal.inc({ outcome: 'completed' });
  }

  async failed(e: TaskFailed): Promise<void> {
    const attempt = {
      taskId: e.taskId,
      attempt: e.attempt,
      workspaceId: e.workspaceId,
      deploymentId: e.deploymentId,
      containerId: e.containerId ?? null,
      machineId: e.machineId ?? null,
    };
    await this.usage.recordTaskFinished(attempt, {
      outcome: 'failed',
      cause: e.cause,
      durationMs: e.durationMs ?? null,
      endedAt: e.failedAt,
    });
    meteringTasksTotal.inc({ outcome: 'failed' });
  }
}
