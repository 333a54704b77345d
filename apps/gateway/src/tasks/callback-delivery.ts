import { Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { getTaskResult, Messaging } from '#tern/messaging';
import { type CallbackClaim, TasksRepository, type TaskWithDeployment } from '#tern/persistence';
import { backoffMs, Ticker } from '#tern/timing';
import { callbackAddressCheck, CallbackTargetRefused, postCallback } from './callback-target.js';
import { taskView } from './task-views.js';

export const CALLBACK_EVERY_MS = 2_000;
/** Callback attempts before giving up: after 1, 2, 4 ... 64 s (about 2 minutes in all). */
export const CALLBACK_ATTEMPTS = 8;
const CALLBACK_BACKOFF = { firstMs: 1000, maxMs: 128_000 };
const CALLBACK_TIMEOUT_MS = 10_000;
/** Callbacks claimed per tick. */
const CALLBACK_BATCH = 20;

/**
 * POSTs a task's view to its callback URL once it is final, with retries. Safe with several
 * gateway replicas: due callbacks are claimed with row locks that skip locked rows, so one replica calls each.
 * Only public addresses are called (callback-target.ts): a refused one, or a redirect, ends the
 * callback at once with the reason in the task's callback.error.
 */
@Injectable()
export class CallbackDelivery implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('callback-delivery');
  private readonly ticker = new Ticker({ name: 'callback delivery', everyMs: CALLBACK_EVERY_MS, logger: this.logger }, () => this.run());
  private readonly allowed = callbackAddressCheck();

  constructor(
    private readonly tasks: TasksRepository,
    private readonly messaging: Messaging,
  ) {}

  onApplicationBootstrap() {
    this.ticker.start();
  }

  async onApplicationShutdown() {
    await this.ticker.stop();
  }

  async run(): Promise<void> {
    await this.tasks.claimCallbacksDue(CALLBACK_BATCH, async (claim) => {
      await Promise.all(claim.tasks.map((task) => this.deliver(claim, task)));
    });
  }

  private async deliver(claim: CallbackClaim, task: TaskWithDeployment) {
    const attempt = task.callbackAttempts + 1;
    let problem: string | undefined;
    let final = false;
    try {
      const result =
        task.state === 'COMPLETE'
          ? { value: task.resultRef ? ((await getTaskResult(this.messaging, task.resultRef)) ?? null) : (task.result ?? null) }
          : undefined;
      const body = JSON.stringify(taskView(task, result));
      const headers = { 'content-type': 'application/json', 'x-tern-task-id': task.id };
      const { status } = await postCallback(task.callbackUrl!, body, headers, CALLBACK_TIMEOUT_MS, this.allowed);
      if (status >= 300 && status < 400) {
        problem = `answered ${status}: redirects are not followed; give the final address as callback_url`;
        final = true;
      } else if (status < 200 || status >= 300) problem = `answered ${status}`;
    } catch (e) {
      problem = (e as Error).message;
      final = e instanceof CallbackTargetRefused;
    }
    if (!problem) {
      await claim.markDelivered(task.id, attempt);
      return;
    }
    const giveUp = final || attempt >= CALLBACK_ATTEMPTS;
    await claim.markAttemptFailed(task.id, attempt, giveUp ? null : backoffMs(attempt, CALLBACK_BACKOFF), problem);
    this.logger.warn(
      { taskId: task.id, url: task.callbackUrl, attempt },
      `callback for task ${task.id} failed (${problem})${giveUp ? '; giving up' : '; will retry'}`,
    );
  }
}
