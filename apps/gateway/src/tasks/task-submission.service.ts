import { Injectable, Logger } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { isIP } from 'node:net';
import { type DeploymentRecord, TASK_ITEM, TASK_PAYLOAD_MAX_BYTES, TASK_SUBMITTED, taskItemOf } from '#tern/contracts';
import { Messaging, taskConsumerSpec } from '#tern/messaging';
import { ApiError, bodyTextProblem, jsonValueProblem } from '#tern/service';
import { fireAndForget } from '#tern/timing';
import { TasksRepository, type UnsentTask } from '#tern/persistence';
import type { Principal } from '../auth/principal.js';
import { deploymentUrl } from '../deployments/deployment-views.js';
import { RoutesMirror, TABLE_NOT_LOADED } from '../endpoints/routes-mirror.js';
import type { SubmitTaskQuery } from './dto/submit-task.query.js';
import { callbackAddressCheck } from './callback-target.js';

/** The kinds whose deployments take tasks, and the route each is called at. */
export type TaskKind = 'task_queue' | 'function';

export interface SubmittedTask {
  task_id: string;
  status: 'PENDING';
  deployment: string;
  version: number;
}

/**
 * Accepts tasks: the row first (so a task the caller was told about always exists; the caller is
 * answered once it is committed), then the TASKS message with Nats-Msg-Id = task id, then the row
 * is marked enqueued with the message's sequence. A gateway that dies in between leaves
 * enqueued_at null; the relay publishes it again, and JetStream's duplicate window keeps a double
 * publish single.
 */
@Injectable()
export class TaskSubmissionService {
  private readonly logger = new Logger('tasks');
  private readonly consumers = new Map<string, Promise<void>>();
  /** Tasks being sent to TASKS or sent and not yet marked enqueued, by id: their stream sequence. */
  private readonly unmarked = new Map<string, Promise<number>>();
  private readonly callbackAddresses = callbackAddressCheck();

  constructor(
    private readonly tasks: TasksRepository,
    private readonly messaging: Messaging,
    private readonly table: RoutesMirror,
  ) {}

  /** A callback_url naming an address callbacks may not reach is refused now; a name is checked when called. */
  private refuseCallbackAddress(url: string): void {
    const host = new URL(url).hostname.replace(/^\[|\]$/g, '');
    const why = isIP(host) ? this.callbackAddresses(host) : undefined;
    if (why) throw new ApiError(400, `callback_url refused: ${why}; callbacks go only to public addresses`);
  }

  async submit(
    principal: Pick<Principal, 'workspaceId'>,
    name: string,
    version: number | undefined,
    body: Buffer,
    query: SubmitTaskQuery,
    kind: TaskKind = 'task_queue',
  ): Promise<SubmittedTask> {
    const record = await this.queue(principal, name, version, kind);
    const payload = parsePayload(body);
    const policy = record.spec.taskPolicy!;
    const callbackUrl = query.callback_url ?? policy.callbackUrl ?? null;
    if (query.callback_url) this.refuseCallbackAddress(query.callback_url);
    const row = await this.tasks.createPending(
      {
        id: randomUUID(),
        workspaceId: record.workspaceId,
        deploymentId: record.deploymentId,
        version: record.version,
        payload,
        maxRetries: query.max_retries ?? policy.maxRetries,
        timeoutSeconds: query.timeout ?? policy.timeoutSeconds,
        ttlSeconds: query.ttl ?? policy.ttlSeconds ?? null,
        callbackUrl,
      },
      policy.maxPendingTasks,
    );
    if (!row) {
      throw new ApiError(
        429,
        `"${name}" already has ${policy.maxPendingTasks} tasks waiting (max_pending_tasks ${policy.maxPendingTasks}): retry later or raise max_pending_tasks`,
      );
    }
    // The committed row is the task's durable record (the relay sends a row never published), and
    // the answer never depended on the publish: a failed one left the task accepted all the same.
    // So the caller hears 202 now and the publish runs behind it, instead of the caller waiting a
    // JetStream round trip (and, on a busy machine, the wake-ups of everything it sets off).
    fireAndForget(`sending task ${row.id} to TASKS (saved: the relay will send it)`, this.logger, this.enqueue(row));
    return { task_id: row.id, status: 'PENDING', deployment: record.name, version: record.version };
  }

  /** Publishes a saved task to TASKS and records where it went. Safe to repeat (same message id). */
  async enqueue(task: UnsentTask): Promise<void> {
    const sending = this.send(task);
    this.unmarked.set(task.id, sending);
    let seq: number;
    try {
      seq = await sending;
    } catch (e) {
      this.unmarked.delete(task.id);
      throw e;
    }
    // Not awaited: the task is safe on TASKS already. Should this write be lost, the relay sends
    // the task again (one message within the duplicate window) and records it then.
    const marking = this.tasks.markEnqueued(task.id, seq).finally(() => this.unmarked.delete(task.id));
    fireAndForget(`marking task ${task.id} enqueued (the relay will)`, this.logger, marking);
  }

  /**
   * Where TASKS holds a task this gateway is sending or has sent but not yet marked, once it is
   * there; undefined for any other. A cancel that finds no sequence on the row asks here, so a
   * task cancelled right after its 202 still has its message deleted (it never runs).
   */
  async sequenceInFlight(taskId: string): Promise<number | undefined> {
    return this.unmarked.get(taskId)?.catch(() => undefined);
  }

  /**
   * Publishes a saved task to TASKS and answers its stream sequence, for a caller that records
   * many at once (a map's chunks: one write per batch, not one queued per task). Safe to repeat.
   */
  async send(task: UnsentTask): Promise<number> {
    await this.ensureConsumer(task.deploymentId, task.version);
    const ack = await this.messaging.publish(TASK_ITEM, taskItemOf(task), {
      tokens: [task.deploymentId, String(task.version)],
      msgId: task.id,
    });
    fireAndForget(
      `publishing task.submitted of task ${task.id}`,
      this.logger,
      this.messaging.publish(
        TASK_SUBMITTED,
        {
          taskId: task.id,
          deploymentId: task.deploymentId,
          deploymentVersion: task.version,
          workspaceId: task.workspaceId,
          maxRetries: task.maxRetries,
          timeoutSeconds: task.timeoutSeconds,
          ...(task.ttlSeconds ? { ttlSeconds: task.ttlSeconds } : {}),
          ...(task.callbackUrl ? { callbackUrl: task.callbackUrl } : {}),
          submittedAt: task.createdAt.toISOString(),
        },
        { msgId: `${task.id}:submitted`, tokens: [task.workspaceId] },
      ),
    );
    return ack.seq;
  }

  /** The task-queue (or function) version a submit names; 404/400/503 with what to fix. */
  async queue(
    principal: Pick<Principal, 'workspaceId'>,
    name: string,
    version: number | undefined,
    kind: TaskKind,
  ): Promise<DeploymentRecord> {
    const what = kind === 'function' ? 'function' : 'task queue';
    if (!(await this.table.ready())) throw new ApiError(503, TABLE_NOT_LOADED);
    const found = this.table.find(principal.workspaceId, name, version);
    if (!found.known) throw new ApiError(404, `${what} "${name}" not found: deploy it with kind: ${kind} first`);
    const record = found.record;
    if (!record) throw new ApiError(404, `${what} "${name}" has no version ${version}`);
    if (record.spec.kind !== kind || !record.spec.taskPolicy) {
      throw new ApiError(
        400,
        `deployment "${name}" is a ${record.spec.kind}, not a ${kind}: call it at ${deploymentUrl('', name, record.spec.kind)}`,
      );
    }
    if (record.state === 'stopped')
      throw new ApiError(
        503,
        `${what} "${name}" is stopped: start it (tern deployment start ${name}) to accept ${kind === 'function' ? 'calls' : 'tasks'}`,
      );
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

/** The body as a JSON value, the handler's one argument ({} when empty); 400/413 otherwise. */
export function parsePayload(body: Buffer): unknown {
  if (body.length > TASK_PAYLOAD_MAX_BYTES) throw new ApiError(413, payloadTooLarge());
  if (!body.length || !body.toString('utf8').trim()) return {};
  // The raw-body route skips the API's JSON parser; the same checks, before jsonb refuses the value.
  const textProblem = bodyTextProblem(body);
  if (textProblem) throw new ApiError(400, `the task payload: ${textProblem}`);
  let value: unknown;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch (e) {
    throw new ApiError(400, `the task payload must be JSON: ${(e as Error).message}`);
  }
  // No input at all is an empty body (the handler gets {}); a jsonb null would read back as none.
  if (value === null)
    throw new ApiError(400, "the task payload is null: send any other JSON value (the handler's argument), or no body for {}");
  const valueProblem = jsonValueProblem(value);
  if (valueProblem) throw new ApiError(400, `the task payload: ${valueProblem}`);
  return value;
}

export function payloadTooLarge(): string {
  return `the task payload is over the ${TASK_PAYLOAD_MAX_BYTES / 1024} KiB limit: pass large inputs by reference (a URL or a volume)`;
}
