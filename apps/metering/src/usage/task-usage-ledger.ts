import { Injectable } from '@nestjs/common';
import { type TaskCompleted, type TaskFailed, type TaskStarted } from '#tern/contracts';
import { type TaskAttempt, UsageRepository } from '#tern/persistence';
import { meteringTasksTotal } from '../metering-metrics.js';

/** The attempt an event is about: a failure may name no container or machine (lost before it ran). */
function attemptOf(e: TaskStarted | TaskCompleted | TaskFailed): TaskAttempt {
  return {
    taskId: e.taskId,
    attempt: e.attempt,
    workspaceId: e.workspaceId,
    deploymentId: e.deploymentId,
    containerId: e.containerId ?? null,
    machineId: e.machineId ?? null,
  };
}

/**
 * One row per task attempt. Like containers, the rules do not depend on the order events are
 * seen in (see UsageRepository.recordTaskFinished).
 */
@Injectable()
export class TaskUsageLedger {
  constructor(private readonly usage: UsageRepository) {}

  async started(e: TaskStarted): Promise<void> {
    await this.usage.recordTaskStarted(attemptOf(e), e.startedAt);
  }

  async completed(e: TaskCompleted): Promise<void> {
    await this.usage.recordTaskFinished(attemptOf(e), {
      outcome: 'completed',
      cause: null,
      durationMs: e.durationMs,
      endedAt: e.completedAt,
    });
    meteringTasksTotal.inc({ outcome: 'completed' });
  }

  async failed(e: TaskFailed): Promise<void> {
    await this.usage.recordTaskFinished(attemptOf(e), {
      outcome: 'failed',
      cause: e.cause,
      durationMs: e.durationMs ?? null,
      endedAt: e.failedAt,
    });
    meteringTasksTotal.inc({ outcome: 'failed' });
  }
}
