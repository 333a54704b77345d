import { Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { STREAMS } from '#tern/contracts';
import { getTaskResult, Messaging } from '#tern/messaging';
import { TaskLedger } from './task-ledger.service.js';
import { TaskSubmissionService, type UnsentTask } from './task-submission.service.js';
import { TASK_COLUMNS, TASK_FROM, type TaskRow, taskView } from './task-views.js';

export const SWEEP_EVERY_MS = 2_000;
/** A task saved this long ago and still not on TASKS had its gateway die in between. */
const UNSENT_AFTER_S = 5;
/** Callback attempts before giving up: after 1, 2, 4 ... 128 s (about 4 minutes in all). */
export const CALLBACK_ATTEMPTS = 8;
const CALLBACK_TIMEOUT_MS = 10_000;

/**
 * Background work on the tasks table, safe with several gateway replicas: sends tasks saved but
 * never published (a double send is one message), expires pending tasks past their ttl and
 * deletes their messages, and delivers callbacks with retries (rows claimed with FOR UPDATE SKIP
 * LOCKED, so one replica calls each).
 */
@Injectable()
export class TaskSweeper implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('task-sweeper');
  private timer?: NodeJS.Timeout;
  private running = false;

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly messaging: Messaging,
    private readonly ledger: TaskLedger,
    private readonly submissions: TaskSubmissionService,
  ) {}

  onApplicationBootstrap() {
    this.timer = setInterval(() => void this.sweep(), SWEEP_EVERY_MS);
  }

  onApplicationShutdown() {
    clearInterval(this.timer);
  }

  async sweep(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      await this.sendUnsent();
      await this.expire();
      await this.deliverCallbacks();
    } catch (e) {
      this.logger.warn(`task sweep failed: ${(e as Error).message}`);
    } finally {
      this.running = false;
    }
  }

  /** Rows saved but never published. Replicas may both send one: the message id keeps it single. */
  private async sendUnsent() {
    const rows: UnsentTask[] = await this.db.query(
      `SELECT id, workspace_id, deployment_id, deployment_version, payload, max_retries, timeout_seconds, ttl_seconds, callback_url, created_at
       FROM tasks WHERE enqueued_at IS NULL AND state = 'PENDING' AND created_at < now() - interval '${UNSENT_AFTER_S} seconds'
       ORDER BY created_at LIMIT 200`,
    );
    for (const row of rows) {
      await this.submissions.enqueue(row);
      this.logger.log({ taskId: row.id }, `sent task ${row.id}, saved ${Math.round((Date.now() - row.created_at.getTime()) / 1000)} s ago but not yet on TASKS`);
    }
  }

  private async expire() {
    const expired = await this.ledger.expire();
    if (!expired.length) return;
    const jsm = await this.messaging.jsm();
    for (const t of expired) {
      if (t.streamSeq !== null) await jsm.streams.deleteMessage(this.messaging.ns.stream(STREAMS.TASKS.name), t.streamSeq, false).catch(() => undefined);
    }
    this.logger.log(`${expired.length} task(s) expired before starting`);
  }

  private async deliverCallbacks() {
    await this.db.transaction(async (tx) => {
      const rows: (TaskRow & { result: unknown })[] = await tx.query(
        `SELECT ${TASK_COLUMNS}, t.result FROM ${TASK_FROM}
         WHERE t.id IN (SELECT id FROM tasks WHERE callback_state = 'pending' AND callback_next_at <= now() ORDER BY callback_next_at LIMIT 20 FOR UPDATE SKIP LOCKED)`,
      );
      await Promise.all(rows.map((row) => this.deliver(tx.query.bind(tx), row)));
    });
  }

  private async deliver(query: (sql: string, args: unknown[]) => Promise<unknown>, row: TaskRow & { result: unknown }) {
    const attempt = row.callback_attempts + 1;
    let problem: string | undefined;
    try {
      const result = row.state === 'COMPLETE' ? { value: row.result_ref ? ((await getTaskResult(this.messaging, row.result_ref)) ?? null) : (row.result ?? null) } : undefined;
      const response = await fetch(row.callback_url!, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-tern-task-id': row.id },
        body: JSON.stringify(taskView(row, result)),
        signal: AbortSignal.timeout(CALLBACK_TIMEOUT_MS),
      });
      await response.arrayBuffer().catch(() => undefined);
      if (!response.ok) problem = `answered ${response.status}`;
    } catch (e) {
      problem = (e as Error).message;
    }
    if (!problem) {
      await query(`UPDATE tasks SET callback_state = 'delivered', callback_attempts = $2, callback_next_at = NULL WHERE id = $1`, [row.id, attempt]);
      return;
    }
    const giveUp = attempt >= CALLBACK_ATTEMPTS;
    await query(
      `UPDATE tasks SET callback_state = $2, callback_attempts = $3, callback_next_at = CASE WHEN $2 = 'failed' THEN NULL ELSE now() + $4 * interval '1 millisecond' END WHERE id = $1`,
      [row.id, giveUp ? 'failed' : 'pending', attempt, 1000 * 2 ** (attempt - 1)],
    );
    this.logger.warn({ taskId: row.id, url: row.callback_url, attempt }, `callback for task ${row.id} failed (${problem})${giveUp ? '; giving up' : '; will retry'}`);
  }
}
