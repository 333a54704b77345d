import { Injectable } from '@nestjs/common';
import { type TaskAttemptEnded } from '#tern/contracts';
import { UsageRepository } from '#tern/persistence';
import { meteringTasksTotal } from '../metering-metrics.js';

/**
 * One row per task attempt, from the gateway's account of it: the lease's machine, container,
 * workspace and deployment, the start it observed and an end and duration bounded by what it
 * observed (see boundAttempt). Like containers, the rules do not depend on the order events
 * are seen in (see UsageRepository.recordTaskFinished).
 */
@Injectable()
export class TaskUsageLedger {
  constructor(private readonly usage: UsageRepository) {}

  async ended(e: TaskAttemptEnded): Promise<void> {
    const attempt = {
      taskId: e.taskId,
      attempt: e.attempt,
      workspaceId: e.workspaceId,
      deploymentId: e.deploymentId,
      containerId: e.containerId ?? null,
      machineId: e.machineId,
    };
    if (e.startedAt) await this.usage.recordTaskStarted(attempt, e.startedAt);
    await this.usage.recordTaskFinished(attempt, {
      outcome: e.outcome,
      cause: e.cause ?? null,
      durationMs: e.durationMs ?? null,
      endedAt: e.endedAt,
    });
    meteringTasksTotal.inc({ outcome: e.outcome });
  }
}
