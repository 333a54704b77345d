import { Injectable, Logger } from '@nestjs/common';
import {
  AGENT_TASK_CANCEL,
  type Conforms,
  type SameType,
  STREAMS,
  type SubmittedTask,
  TASK_CANCELLED,
  TASK_ITEM,
  taskConsumerName,
  type TaskList,
  type TaskStats,
  subjectFor,
} from '#tern/contracts';
import { getTaskResult, Messaging } from '#tern/messaging';
import { type CancelledTask, DeploymentsRepository, TasksRepository, type TaskWithDeployment } from '#tern/persistence';
import { ApiError } from '#tern/service';
import type { Principal } from '../auth/principal.js';
import type { ListTasksQuery } from './dto/list-tasks.query.js';
import { type SubmittedTask as Submitted, TaskSubmissionService } from './task-submission.service.js';
import { TaskTransitions } from './task-transitions.js';
import { TaskWaiters } from './task-waiters.js';
import { statsWindow, taskStats } from './task-stats.js';
import { decodeCursor, encodeCursor, isFinal, taskView, type TaskView } from './task-views.js';

/** What the caller calls the task in messages: a task of a queue, or a call of a function. */
export type TaskNoun = 'task' | 'call';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Reading, listing, waiting for and cancelling the tasks of the caller's workspace. */
@Injectable()
export class TasksService {
  private readonly logger = new Logger('tasks');

  constructor(
    private readonly tasks: TasksRepository,
    private readonly messaging: Messaging,
    private readonly transitions: TaskTransitions,
    private readonly waiters: TaskWaiters,
    private readonly deployments: DeploymentsRepository,
    private readonly submissions: TaskSubmissionService,
  ) {}

  async get(principal: Principal, id: string, noun: TaskNoun = 'task'): Promise<TaskView> {
    const row = await this.row(principal, id, true, noun);
    return taskView(row, await this.result(row));
  }

  async list(principal: Principal, q: ListTasksQuery) {
    const limit = q.limit ?? 50;
    let before: { createdAt: string; id: string } | undefined;
    if (q.cursor) {
      before = decodeCursor(q.cursor);
      if (!before || !UUID.test(before.id)) throw new ApiError(400, 'cursor must be the next_cursor of a previous page');
    }
    const rows = await this.tasks.listForWorkspace(
      principal.workspaceId,
      { deploymentName: q.deployment, states: q.status, before },
      limit + 1,
    );
    const page = rows.slice(0, limit);
    return { tasks: page.map((r) => taskView(r)), next_cursor: rows.length > limit ? encodeCursor(page[page.length - 1]) : null };
  }

  async stats(principal: Principal, deployment: string | undefined, minutes: number): Promise<TaskStats> {
    if (deployment !== undefined) {
      const found = await this.deployments.findByName(principal.workspaceId, deployment);
      if (!found || found.state === 'deleted')
        throw new ApiError(404, `deployment "${deployment}" not found in workspace "${principal.workspaceName}"`);
    }
    const window = statsWindow(new Date(), minutes);
    const [activity, durations] = await Promise.all([
      this.tasks.activity(principal.workspaceId, deployment, window.from, window.stepSeconds),
      this.tasks.durationPercentiles(principal.workspaceId, deployment, window.from),
    ]);
    return taskStats(activity, window, deployment, durations);
  }

  /** Waits up to timeoutSeconds for the task to end; answers its state either way (done tells which). */
  async wait(principal: Principal, id: string, timeoutSeconds: number, noun: TaskNoun = 'task'): Promise<TaskView> {
    const deadline = Date.now() + timeoutSeconds * 1000;
    let row = await this.row(principal, id, true, noun);
    while (!isFinal(row.state) && Date.now() < deadline) {
      // The same task the first read found in the caller's workspace, as this replica wrote its end.
      const ended = await this.waiters.next(id, deadline - Date.now());
      row = ended ?? (await this.row(principal, id, true, noun));
    }
    return taskView(row, await this.result(row));
  }

  /**
   * Cancels a task: the row first (final, so any later outcome is ignored), then its TASKS
   * message is deleted (a pending task never runs), then agents are told (a running one is
   * stopped by the agent that runs it).
   */
  async cancel(principal: Principal, id: string): Promise<TaskView> {
    const row = await this.row(principal, id, false);
    const done = await this.transitions.cancel(row.id, principal.workspaceId);
    if (!done) throw new ApiError(409, `task ${id} already ended (${row.state}): nothing to cancel`);
    await this.stopCancelled(done, principal.workspaceId, 'cancelled by the user');
    return this.get(principal, id);
  }

  /**
   * After a task's row became CANCELLED: its TASKS message is deleted (a pending task never
   * runs), task.cancelled is published, and the agent holding a running one is told to stop it.
   */
  async stopCancelled(done: CancelledTask, workspaceId: string, reason: string): Promise<void> {
    // Not on the row yet: the task may have been answered 202 a moment ago, its message on its way.
    const streamSeq = done.streamSeq ?? (await this.submissions.sequenceInFlight(done.id));
    if (streamSeq !== undefined) {
      const jsm = await this.messaging.jsm();
      await jsm.streams
        .deleteMessage(this.messaging.ns.stream(STREAMS.TASKS.name), streamSeq, false)
        .catch(() => undefined /* already acked and gone: it ran, or is running */);
    }
    await this.messaging
      .publish(
        TASK_CANCELLED,
        {
          taskId: done.id,
          deploymentId: done.deploymentId,
          deploymentVersion: done.version,
          workspaceId,
          reason,
          wasRunning: done.was === 'RUNNING',
          cancelledAt: new Date().toISOString(),
        },
        { msgId: `${done.id}:cancelled`, tokens: [workspaceId] },
      )
      .catch((e: Error) => this.logger.warn({ taskId: done.id, err: e.message }, 'could not publish task.cancelled'));
    // Only the lease holder hears it: no other machine learns of the task.
    if (done.was === 'RUNNING' && done.machineId)
      this.messaging.emit(AGENT_TASK_CANCEL, { taskId: done.id, attempt: done.attempts, reason }, [done.machineId]);
  }

  /**
   * A task queue was deleted: its unfinished tasks are CANCELLED (none will run: its containers
   * wind down), its consumers removed and its TASKS messages deleted.
   */
  async dropQueue(deploymentId: string, latestVersion: number): Promise<number> {
    const cancelled = await this.transitions.cancelAllOf(deploymentId, 'cancelled: its task queue was deleted');
    const jsm = await this.messaging.jsm();
    const stream = this.messaging.ns.stream(STREAMS.TASKS.name);
    for (let v = 1; v <= latestVersion; v++) await jsm.consumers.delete(stream, taskConsumerName(deploymentId, v)).catch(() => undefined);
    if (cancelled) this.logger.log({ deploymentId, cancelled }, `cancelled ${cancelled} task(s) of a deleted task queue`);
    // In the background: a queue may hold many. What a crash leaves behind expires with TASKS' max age.
    void this.deleteMessages(deploymentId, latestVersion).catch((e: Error) =>
      this.logger.warn({ deploymentId, err: e.message }, 'could not delete the messages of a deleted task queue'),
    );
    return cancelled;
  }

  /**
   * Deletes a deleted queue's TASKS messages one by one by sequence: the gateway may delete a
   * TASKS message, never purge the stream (a purge's filter is not in its subject, so no
   * permission could confine it to one queue).
   */
  private async deleteMessages(deploymentId: string, latestVersion: number): Promise<void> {
    const jsm = await this.messaging.jsm();
    const stream = this.messaging.ns.stream(STREAMS.TASKS.name);
    let deleted = 0;
    for (let v = 1; v <= latestVersion; v++) {
      const subject = this.messaging.ns.subject(subjectFor(TASK_ITEM, deploymentId, String(v)));
      for (let seq = 0; ;) {
        // The client's type omits next_by_subj; nats-server answers it on STREAM.MSG.GET since 2.9.
        const m = await jsm.streams.getMessage(stream, { next_by_subj: subject, seq } as unknown as { seq: number });
        if (!m) break;
        await jsm.streams.deleteMessage(stream, m.seq, false);
        deleted++;
        seq = m.seq + 1;
      }
    }
    if (deleted) this.logger.log({ deploymentId, deleted }, `deleted ${deleted} message(s) of a deleted task queue`);
  }

  private async row(principal: Principal, id: string, withResult: boolean, noun: TaskNoun = 'task'): Promise<TaskWithDeployment> {
    const from = noun === 'call' ? 'POST /function/<name>' : 'POST /taskqueue/<name>';
    if (!UUID.test(id)) throw new ApiError(400, `"${id}" is not a ${noun} id (${noun} ids are UUIDs, as ${from} returns them)`);
    const task = await this.tasks.findInWorkspace(id, principal.workspaceId, withResult);
    if (!task) throw new ApiError(404, `${noun} ${id} not found in workspace ${principal.workspaceName}`);
    return task;
  }

  private async result(row: TaskWithDeployment): Promise<{ value: unknown } | undefined> {
    if (row.state !== 'COMPLETE') return undefined;
    if (!row.resultRef) return { value: row.result ?? null };
    const value = await getTaskResult(this.messaging, row.resultRef);
    if (value === undefined) throw new ApiError(410, `the result of task ${row.id} is no longer in the results store`);
    return { value };
  }
}

/** The answers built outside task-views.ts, held to their contracts (shared with the CLI). */
export type TaskAnswersConform = [
  Conforms<SameType<Awaited<ReturnType<TasksService['list']>>, TaskList>>,
  Conforms<SameType<Submitted, SubmittedTask>>,
];
