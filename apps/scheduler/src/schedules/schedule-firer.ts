import { Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { type ResolvedSpec, scheduleExpression, TASK_ITEM, taskItemOf, ticksBetween } from '#tern/contracts';
import { Messaging, taskConsumerSpec } from '#tern/messaging';
import { type ScheduledDeployment, SchedulesRepository, TasksRepository } from '#tern/persistence';
import { Ticker } from '#tern/timing';

export const FIRE_EVERY_MS = 250;

/**
 * Fires schedules: every replica computes the same ticks (croner, or epoch-aligned periods) and
 * tries to claim each one as it passes; the claim (a unique row per deployment and tick time,
 * saved with the tick's task) lets one replica fire it, so a tick fires once however many
 * replicas run and none is lost while one is alive. A stopped deployment's schedule is paused
 * (its ticks are not claimed); after downtime, catch_up latest fires one run for what was missed.
 */
@Injectable()
export class ScheduleFirer implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('schedules');
  private readonly ticker = new Ticker({ name: 'schedule firer', everyMs: FIRE_EVERY_MS, logger: this.logger }, () => this.run());
  /** Per deployment version and schedule: ticks up to here were tried. */
  private readonly cursors = new Map<string, Date>();
  private readonly consumers = new Set<string>();

  constructor(
    private readonly schedules: SchedulesRepository,
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
    const now = new Date();
    const seen = new Set<string>();
    for (const d of await this.schedules.scheduled()) {
      if (d.state !== 'ready') continue; // stopped (paused), or not yet built
      // Stored resolved at deploy (with the submitted spec beside it): defaults filled, checked.
      const spec = d.spec as unknown as ResolvedSpec;
      const schedule = spec.schedule;
      if (!schedule || !spec.taskPolicy) continue;
      const key = `${d.deploymentId}:${d.version}:${scheduleExpression(schedule)}:${schedule.timezone}`;
      seen.add(key);
      const cursor = this.cursors.get(key);
      if (!cursor) {
        // First sight (start-up, a new version, a resume): missed ticks are skipped, or run once.
        if (schedule.catchUp === 'latest' && d.lastTickAt) {
          const missed = ticksBetween(schedule, d.lastTickAt, now);
          if (missed.length) await this.fire(d, spec, missed[missed.length - 1]);
        }
      } else {
        for (const tick of ticksBetween(schedule, cursor, now)) await this.fire(d, spec, tick);
      }
      this.cursors.set(key, now);
    }
    for (const key of this.cursors.keys()) if (!seen.has(key)) this.cursors.delete(key);
  }

  private async fire(d: ScheduledDeployment, spec: ResolvedSpec, tick: Date): Promise<void> {
    const policy = spec.taskPolicy!;
    const task = await this.schedules.claim(d.deploymentId, tick, {
      id: randomUUID(),
      workspaceId: d.workspaceId,
      deploymentId: d.deploymentId,
      version: d.version,
      payload: spec.schedule!.input,
      maxRetries: policy.maxRetries,
      timeoutSeconds: policy.timeoutSeconds,
      ttlSeconds: policy.ttlSeconds ?? null,
      callbackUrl: policy.callbackUrl ?? null,
    });
    if (!task) return; // another replica fired it
    this.logger.log(
      { deployment: d.name, tick: tick.toISOString(), taskId: task.id },
      `schedule of ${d.name} fired for ${tick.toISOString()}`,
    );
    // Saved already: should this publish fail, the gateway's task relay sends it.
    try {
      const key = `${d.deploymentId}.${d.version}`;
      if (!this.consumers.has(key)) {
        await this.messaging.ensureConsumer(taskConsumerSpec(d.deploymentId, d.version));
        this.consumers.add(key);
      }
      const ack = await this.messaging.publish(TASK_ITEM, taskItemOf(task), {
        tokens: [d.deploymentId, String(d.version)],
        msgId: task.id,
      });
      await this.tasks.markEnqueued(task.id, ack.seq);
    } catch (e) {
      this.logger.warn({ taskId: task.id, err: (e as Error).message }, 'tick saved but its task not yet on TASKS; the relay will send it');
    }
  }
}
