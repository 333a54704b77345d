import { Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { TasksRepository } from '#tern/persistence';
import { Ticker } from '#tern/timing';
import { TaskSubmissionService } from './task-submission.service.js';

export const RELAY_EVERY_MS = 2_000;
/** A task saved this long ago and still not on TASKS had its gateway die in between. */
const UNSENT_AFTER_S = 5;

/**
 * The tasks table as an outbox: sends tasks saved but never published to TASKS. Safe with
 * several gateway replicas: two may send one task, and its message id keeps it single.
 */
@Injectable()
export class TaskOutboxRelay implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('task-outbox-relay');
  private readonly ticker = new Ticker({ name: 'task outbox relay', everyMs: RELAY_EVERY_MS, logger: this.logger }, () => this.run());

  constructor(
    private readonly tasks: TasksRepository,
    private readonly submissions: TaskSubmissionService,
  ) {}

  onApplicationBootstrap() {
    this.ticker.start();
  }

  async onApplicationShutdown() {
    await this.ticker.stop();
  }

  async run(): Promise<void> {
    for (const task of await this.tasks.listUnsent(UNSENT_AFTER_S)) {
      await this.submissions.enqueue(task);
      this.logger.log(
        { taskId: task.id },
        `sent task ${task.id}, saved ${Math.round((Date.now() - task.createdAt.getTime()) / 1000)} s ago but not yet on TASKS`,
      );
    }
  }
}
