import { Injectable } from '@nestjs/common';
import { type TaskAttemptEnded } from '#tern/contracts';
import { GroupCommit, type TaskAttempt, UsageRepository } from '#tern/persistence';
import { meteringTasksTotal } from '../metering-metrics.js';

/**
 * One row per task attempt, from the gateway's account of it: the lease's machine, container,
 * workspace and deployment, the start it observed and an end and duration bounded by what it
 * observed (see boundAttempt). Like containers, the rules do not depend on the order events
 * are seen in (see UsageRepository.recordTaskFinished), so the events that arrive while one
 * batch is written are applied together: two statements per batch (starts, then ends), not two
 * per event. An event is acknowledged once its batch is stored.
 */
@Injectable()
export class TaskUsageLedger {
  private readonly batches = new GroupCommit<TaskAttemptEnded, void>((events) => this.apply(events));

  constructor(private readonly usage: UsageRepository) {}

  ended(e: TaskAttemptEnded): Promise<void> {
    return this.batches.add(e);
  }

  private async apply(events: TaskAttemptEnded[]): Promise<void[]> {
    const attempts = events.map(attemptOf);
    const starts = events.flatMap((e, i) => (e.startedAt ? [{ attempt: attempts[i], startedAt: e.startedAt }] : []));
    if (starts.length) await this.usage.recordTasksStarted(starts);
    await this.usage.recordTasksFinished(
      events.map((e, i) => ({
        attempt: attempts[i],
        end: { outcome: e.outcome, cause: e.cause ?? null, durationMs: e.durationMs ?? null, endedAt: e.endedAt },
      })),
    );
    for (const e of events) meteringTasksTotal.inc({ outcome: e.outcome });
    return events.map(() => undefined);
  }
}

function attemptOf(e: TaskAttemptEnded): TaskAttempt {
  return {
    taskId: e.taskId,
    attempt: e.attempt,
    workspaceId: e.workspaceId,
    deploymentId: e.deploymentId,
    containerId: e.containerId ?? null,
    machineId: e.machineId,
  };
}
