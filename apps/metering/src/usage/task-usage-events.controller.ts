import { Controller } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { TASK_ATTEMPT_ENDED, TASK_ATTEMPTS_ENDED, TaskAttemptEnded, TaskAttemptsEnded } from '#tern/contracts';
import { OnMessage } from '#tern/messaging';
import { meteringEventsTotal } from '../metering-metrics.js';
import { CONSUMER } from './consumer-options.js';
import { TaskUsageLedger } from './task-usage-ledger.js';

/**
 * Task attempts: where each ran, how it ended, how long it took, as the gateway accepted them
 * from the holder of the attempt's lease (task.attempt-ended, or several in task.attempts-ended),
 * never on an agent's own word.
 */
@Controller()
export class TaskUsageEventsController {
  constructor(private readonly ledger: TaskUsageLedger) {}

  /** Many in flight: the ledger writes the ones that arrive together in one batch. */
  @OnMessage(TASK_ATTEMPT_ENDED, { ...CONSUMER, concurrency: 64 })
  async ended(@Payload() event: TaskAttemptEnded) {
    await this.ledger.ended(event);
    meteringEventsTotal.inc({ kind: 'task.attempt-ended' });
  }

  /** Each member as a lone fact (the same attempt rules: a row per attempt, whichever message told it); acknowledged once all are stored. */
  @OnMessage(TASK_ATTEMPTS_ENDED, { ...CONSUMER, concurrency: 16 })
  async endedMany(@Payload() event: TaskAttemptsEnded) {
    await Promise.all(event.attempts.map((a) => this.ledger.ended(a)));
    meteringEventsTotal.inc({ kind: 'task.attempts-ended' });
  }
}
