import { Injectable } from '@nestjs/common';
import { TASK_ATTEMPT_ENDED, TASK_ATTEMPTS_ENDED, TASK_ATTEMPTS_ENDED_MAX, type TaskAttemptEnded } from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import { batchMsgId } from '#tern/tasks';
import { GroupCommit } from '#tern/timing';

/**
 * The attempt outcomes the gateway accepted, told to metering and reputation. Facts handed in
 * while one is being published go together in the next message (task.attempts-ended; a lone one
 * as task.attempt-ended, Nats-Msg-Id `<task id>:ended:<attempt>` as before), so a burst of
 * completions, a bunch of map chunks above all, costs each consumer one delivery, validation and
 * ack instead of one per task. Each caller's promise settles once its fact is stored in
 * JetStream: a task event is acknowledged only after that, so a gateway that dies in between
 * tells it again when the event is delivered again. A re-told fact may then travel with other
 * members than the first time (another msg id): metering and reputation count an attempt once
 * whichever message tells it (metering's row per attempt, reputation's seen list).
 */
@Injectable()
export class AttemptFacts {
  private readonly batches = new GroupCommit<TaskAttemptEnded, void>((facts) => this.publish(facts), {
    maxBatch: TASK_ATTEMPTS_ENDED_MAX,
    // The same attempt told twice (a re-tell beside its first telling) goes in separate messages.
    keyOf: (f) => `${f.taskId}:${f.attempt}`,
  });

  constructor(private readonly messaging: Messaging) {}

  /** Resolves once the fact is stored in JetStream. */
  tell(fact: TaskAttemptEnded): Promise<void> {
    return this.batches.add(fact);
  }

  private async publish(facts: TaskAttemptEnded[]): Promise<void[]> {
    if (facts.length === 1) {
      const [fact] = facts as [TaskAttemptEnded];
      await this.messaging.publish(TASK_ATTEMPT_ENDED, fact, { msgId: `${fact.taskId}:ended:${fact.attempt}` });
    } else await this.messaging.publish(TASK_ATTEMPTS_ENDED, { attempts: facts }, { msgId: batchMsgId('attempts-ended', facts) });
    return facts.map(() => undefined);
  }
}
