import { Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { type DeploymentRecord, TASK_ITEM, TASK_PAYLOAD_MAX_BYTES, TASK_SUBMITTED, type TaskItem } from '#tern/contracts';
import { Messaging, taskConsumerSpec } from '#tern/messaging';
import type { Principal } from '../auth/principal.js';
import { RoutesMirror } from '../endpoints/routes-mirror.js';
import type { SubmitTaskQuery } from './dto/submit-task.query.js';
import { TaskHttpError } from './task-errors.js';

export interface SubmittedTask {
  task_id: string;
  status: 'PENDING';
  deployment: string;
  version: number;
}

/** The row columns a task is published from, for a submit and for the sweep that re-sends. */
export interface UnsentTask {
  id: string;
  workspace_id: string;
  deployment_id: string;
  deployment_version: number;
  payload: Record<string, unknown>;
  max_retries: number;
  timeout_seconds: number;
  ttl_seconds: number | null;
  callback_url: string | null;
  created_at: Date;
}

/**
 * Accepts tasks: the row first (so a task the caller was told about always exists), then the
 * TASKS message with Nats-Msg-Id = task id, then the row is marked enqueued with the message's
 * sequence. A gateway that dies in between leaves enqueued_at null; the sweep publishes it
 * again, and JetStream's duplicate window keeps a double publish single.
 */
@Injectable()
export class TaskSubmissionService {
  private readonly logger = new Logger('tasks');
  private readonly consumers = new Map<string, Promise<void>>();

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly messaging: Messaging,
    private readonly table: RoutesMirror,
  ) {}

  async submit(principal: Principal, name: string, version: number | undefined, body: Buffer, query: SubmitTaskQuery): Promise<SubmittedTask> {
    const record = await this.queue(principal, name, version);
    const payload = parsePayload(body);
    const policy = record.spec.taskPolicy!;
    const callbackUrl = query.callback_url ?? policy.callbackUrl ?? null;
    // The bound on waiting tasks and the insert in one round trip (concurrent submits may overshoot it by a few).
    const rows = (await this.db.query(
      `INSERT INTO tasks (id, workspace_id, deployment_id, deployment_version, state, payload, max_retries, timeout_seconds, ttl_seconds, callback_url)
       SELECT $1, $2, $3, $4, 'PENDING', $5, $6, $7, $8, $9
       WHERE (SELECT count(*) FROM tasks WHERE deployment_id = $3 AND state IN ('PENDING', 'RETRY')) < $10
       RETURNING id, workspace_id, deployment_id, deployment_version, payload, max_retries, timeout_seconds, ttl_seconds, callback_url, created_at`,
      [
        randomUUID(),
        record.workspaceId,
        record.deploymentId,
        record.version,
        JSON.stringify(payload),
        query.max_retries ?? policy.maxRetries,
        query.timeout ?? policy.timeoutSeconds,
        query.ttl ?? policy.ttlSeconds ?? null,
        callbackUrl,
        policy.maxPendingTasks,
      ],
    )) as UnsentTask[];
    const row = rows[0];
    if (!row) {
      throw new TaskHttpError(429, `"${name}" already has ${policy.maxPendingTasks} tasks waiting (max_pending_tasks ${policy.maxPendingTasks}): retry later or raise max_pending_tasks`);
    }
    try {
      await this.enqueue(row);
    } catch (e) {
      // The row stays unsent and the sweep sends it: the task is accepted all the same.
      this.logger.warn({ taskId: row.id, err: (e as Error).message }, 'task saved but not yet on TASKS; the sweep will send it');
    }
    return { task_id: row.id, status: 'PENDING', deployment: record.name, version: record.version };
  }

  /** Publishes a saved task to TASKS and records where it went. Safe to repeat (same message id). */
  async enqueue(task: UnsentTask): Promise<void> {
    await this.ensureConsumer(task.deployment_id, task.deployment_version);
    const item: TaskItem = {
      taskId: task.id,
      deploymentId: task.deployment_id,
      deploymentVersion: task.deployment_version,
      workspaceId: task.workspace_id,
      payload: task.payload,
      maxRetries: task.max_retries,
      timeoutSeconds: task.timeout_seconds,
      ...(task.ttl_seconds ? { expiresAt: new Date(task.created_at.getTime() + task.ttl_seconds * 1000).toISOString() } : {}),
      enqueuedAt: new Date().toISOString(),
    };
    const ack = await this.messaging.publish(TASK_ITEM, item, { tokens: [task.deployment_id, String(task.deployment_version)], msgId: task.id });
    // Not awaited: the task is safe on TASKS already. Should this write be lost, the sweep sends
    // the task again (one message within the duplicate window) and records it then.
    void this.db
      .query(`UPDATE tasks SET enqueued_at = now(), stream_seq = $2 WHERE id = $1 AND enqueued_at IS NULL`, [task.id, ack.seq])
      .catch((e: Error) => this.logger.warn({ taskId: task.id, err: e.message }, 'could not mark the task enqueued; the sweep will'));
    void this.messaging
      .publish(
        TASK_SUBMITTED,
        {
          taskId: task.id,
          deploymentId: task.deployment_id,
          deploymentVersion: task.deployment_version,
          workspaceId: task.workspace_id,
          maxRetries: task.max_retries,
          timeoutSeconds: task.timeout_seconds,
          ...(task.ttl_seconds ? { ttlSeconds: task.ttl_seconds } : {}),
          ...(task.callback_url ? { callbackUrl: task.callback_url } : {}),
          submittedAt: task.created_at.toISOString(),
        },
        { msgId: `${task.id}:submitted` },
      )
      .catch((e: Error) => this.logger.warn({ taskId: task.id, err: e.message }, 'could not publish task.submitted'));
  }

  /** The task-queue version a submit names; 404/400/503 with what to fix. */
  private async queue(principal: Principal, name: string, version: number | undefined): Promise<DeploymentRecord> {
    await this.table.ready();
    const found = this.table.find(principal.workspaceId, name, version);
    if (!found.known) throw new TaskHttpError(404, `task queue "${name}" not found: deploy it with kind: task_queue first`);
    const record = found.record;
    if (!record) throw new TaskHttpError(404, `task queue "${name}" has no version ${version}`);
    if (record.spec.kind !== 'task_queue' || !record.spec.taskPolicy) {
      throw new TaskHttpError(400, `deployment "${name}" is a ${record.spec.kind}, not a task_queue: call it at /endpoint/${name}`);
    }
    if (record.state === 'stopped') throw new TaskHttpError(503, `task queue "${name}" is stopped: start it (tern deployment start ${name}) to accept tasks`);
    return record;
  }

  private ensureConsumer(deploymentId: string, version: number): Promise<void> {
    const key = `${deploymentId}.${version}`;
    let ready = this.consumers.get(key);
    if (!ready) {
      ready = this.messaging.ensureConsumer(taskConsumerSpec(deploymentId, version));
      ready.catch(() => this.consumers.delete(key));
      this.consumers.set(key, ready);
    }
    return ready;
  }
}

/** The body as a JSON object (a handler's keyword arguments); 400/413 otherwise. */
export function parsePayload(body: Buffer): Record<string, unknown> {
  if (body.length > TASK_PAYLOAD_MAX_BYTES) throw new TaskHttpError(413, payloadTooLarge());
  if (!body.length || !body.toString('utf8').trim()) return {};
  let value: unknown;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch (e) {
    throw new TaskHttpError(400, `the task payload must be JSON: ${(e as Error).message}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new TaskHttpError(400, 'the task payload must be a JSON object (its fields are the handler\'s input), e.g. {"prompt": "..."}');
  }
  return value as Record<string, unknown>;
}

export function payloadTooLarge(): string {
  return `the task payload is over the ${TASK_PAYLOAD_MAX_BYTES / 1024} KiB limit: pass large inputs by reference (a URL or a volume)`;
}
