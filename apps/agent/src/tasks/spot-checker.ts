import { createHash } from 'node:crypto';
import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import type { Subscription } from '@nats-io/transport-node';
import {
  AGENT_TASK_SPOT_CHECK,
  resultBytesForComparison,
  TASK_RESULT_INLINE_BYTES,
  TASK_SPOT_CHECKED,
  type TaskSpotCheck,
  type TaskSpotChecked,
} from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import { fireAndForget } from '#tern/timing';
import { AGENT_CONTEXT, type AgentContext } from '../agent-context.js';
import { callHandler } from './call-handler.js';
import { TaskDispatcher } from './task-dispatcher.js';

/**
 * Runs spot checks the gateway asks of this machine (it chose it as a verifier): the task once
 * more, in the named container of the task's version, through the same handler call as a task;
 * answers the digest of the output as the control plane keeps a result (resultBytesForComparison).
 * Nothing of the task itself: no lease, no ack, no result stored.
 */
@Injectable()
export class SpotChecker implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('spot-checks');
  private subscription?: Subscription;
  private readonly running = new Set<AbortController>();

  constructor(
    private readonly messaging: Messaging,
    private readonly tasks: TaskDispatcher,
    @Inject(AGENT_CONTEXT) private readonly ctx: AgentContext,
  ) {}

  onApplicationBootstrap() {
    const machineId = this.ctx.registration.machineId;
    this.subscription = this.messaging.listen(
      AGENT_TASK_SPOT_CHECK,
      (c) => fireAndForget(`spot check of task ${c.taskId}`, this.logger, this.check(c)),
      [machineId],
    );
  }

  onApplicationShutdown() {
    this.subscription?.unsubscribe();
    for (const abort of this.running) abort.abort();
  }

  private async check(c: TaskSpotCheck): Promise<void> {
    const machineId = this.ctx.registration.machineId;
    const answer: TaskSpotChecked = {
      taskId: c.taskId,
      workspaceId: c.workspaceId,
      deploymentId: c.deploymentId,
      machineId,
      containerId: c.containerId,
      outcome: 'error',
      at: '',
    };
    const served = this.tasks.endpointOf(c.containerId);
    if (!served || served.deploymentId !== c.deploymentId || served.deploymentVersion !== c.deploymentVersion) {
      answer.error = `container ${c.containerId} of version ${c.deploymentVersion} is not running on this machine`;
    } else {
      const abort = new AbortController();
      this.running.add(abort);
      const timer = setTimeout(() => abort.abort(), c.timeoutSeconds * 1000);
      try {
        const outcome = await callHandler(served.endpoint, c.taskId, c.attempt, c.payload, abort.signal);
        if (outcome.kind === 'ok') {
          const kept = resultBytesForComparison(outcome.json, TASK_RESULT_INLINE_BYTES);
          answer.outcome = 'ok';
          answer.resultSha256 = `sha256:${createHash('sha256').update(kept).digest('hex')}`;
        } else answer.error = outcome.kind === 'aborted' ? `ran longer than ${c.timeoutSeconds} s` : outcome.message;
      } catch (e) {
        answer.error = `its output is not JSON: ${(e as Error).message}`;
      } finally {
        clearTimeout(timer);
        this.running.delete(abort);
      }
    }
    answer.at = new Date().toISOString();
    if (answer.error) answer.error = answer.error.slice(0, 2000);
    await this.messaging.publish(TASK_SPOT_CHECKED, answer, { msgId: `${c.taskId}:spot-checked` });
    this.logger.log({ taskId: c.taskId, outcome: answer.outcome }, `spot check of task ${c.taskId}: ${answer.outcome}`);
  }
}
