import { createHash } from 'node:crypto';
import { Injectable, Logger } from '@nestjs/common';
import { Counter } from 'prom-client';
import { AGENT_TASK_SPOT_CHECK, TASK_SPOT_CHECK_ENDED, type TaskSpotChecked, type TaskSpotCheckRecord } from '#tern/contracts';
import { getTaskResultBytes, Messaging } from '#tern/messaging';
import { MachineVerificationRepository, type SpotCheckOfTask, TasksRepository, type TaskWithDeployment } from '#tern/persistence';
import { chooseVerifier, sampledForSpotCheck } from '#tern/tasks';
import { RoutesMirror } from '../endpoints/routes-mirror.js';
import { ReputationReader } from '../machines/reputation-reader.js';

const sha256 = (bytes: Uint8Array | string) => `sha256:${createHash('sha256').update(bytes).digest('hex')}`;

/**
 * Spot checks settled, by outcome: `agreed` and `disagreed` by the verifier's digest, `failed` when
 * its run gave no result, `expired` when it never answered (SpotCheckExpiry). Counted by the
 * replica whose UPDATE settled the check, so each check once.
 */
export const spotCheckVerdicts = new Counter({
  name: 'tern_spot_checks_total',
  help: 'Spot checks of task results settled, by outcome (agreed, disagreed, failed: the verifier gave no result, expired: it never answered).',
  labelNames: ['outcome'],
});

/** Whether a verifier's answer was taken, and if not why. */
export type SpotCheckAnswer = { accepted: true } | { accepted: false; detail: string };

/**
 * Spot checks of results (a deployment's `verify: {sample}`). When the gateway accepts a task's
 * completion from its lease holder and the task is drawn, it chooses a verifier (a verified
 * machine of higher reputation with a ready container of the version: chooseVerifier), records the
 * check on the task and asks that machine alone to run the task again. The verifier's answer is
 * believed only from the machine and container chosen; its digest is compared with the task's
 * result, and the verdict is told to reputation (task.spot-check-ended), which counts a
 * disagreement against the machine checked. The task's result, state, callback and metering are
 * never touched: the check is no attempt of the task.
 */
@Injectable()
export class SpotChecks {
  private readonly logger = new Logger('spot-checks');

  constructor(
    private readonly tasks: TasksRepository,
    private readonly messaging: Messaging,
    private readonly table: RoutesMirror,
    private readonly reputation: ReputationReader,
    private readonly verification: MachineVerificationRepository,
  ) {}

  /**
   * After the completion of `attempt` by `machineId` was accepted (`inline`: the result as kept,
   * JSON text; null when stored as task.resultRef). Once per task: a repeated completion finds
   * the check recorded and asks nothing again.
   */
  async consider(task: TaskWithDeployment, attempt: number, machineId: string, inline: string | null): Promise<void> {
    const sample = this.table.record(task.deploymentId, task.version)?.spec.verify?.sample;
    if (!sample || !sampledForSpotCheck(task.id, sample)) return;
    const bytes = inline ?? (task.resultRef ? await getTaskResultBytes(this.messaging, task.resultRef) : 'null');
    if (bytes === undefined) return;
    const routes = this.table.routesOf(task.deploymentId, task.version);
    const ids = [...new Set([machineId, ...routes.map((r) => r.machineId)])];
    const [scores, verified] = await Promise.all([this.reputation.current(ids), this.verification.verifiedAmong(ids)]);
    const choice = chooseVerifier(
      machineId,
      scores.get(machineId)?.score,
      routes.map((r) => ({
        machineId: r.machineId,
        containerId: r.containerId,
        verified: verified.has(r.machineId),
        score: scores.get(r.machineId)?.score,
      })),
    );
    const base = { machineId, attempt, resultSha256: sha256(bytes), requestedAt: new Date().toISOString() };
    const check: TaskSpotCheckRecord = choice.chosen
      ? { ...base, state: 'pending', verifierMachineId: choice.machineId, verifierContainerId: choice.containerId }
      : { ...base, state: 'skipped', reason: choice.reason };
    const begun = await this.tasks.beginSpotCheck(task.id, check);
    if (!begun || !choice.chosen) return;
    this.messaging.emit(
      AGENT_TASK_SPOT_CHECK,
      {
        taskId: task.id,
        deploymentId: task.deploymentId,
        deploymentVersion: task.version,
        workspaceId: task.workspaceId,
        containerId: choice.containerId,
        attempt,
        payload: begun.payload,
        timeoutSeconds: task.timeoutSeconds,
      },
      [choice.machineId],
    );
    this.logger.log(
      { taskId: task.id, machineId, verifier: choice.machineId },
      `spot check of task ${task.id} asked of ${choice.machineId}`,
    );
  }

  /** A verifier's answer: settles the check it was asked for, and tells reputation the verdict. */
  async answered(e: TaskSpotChecked): Promise<SpotCheckAnswer> {
    const current = await this.tasks.spotCheckOf(e.taskId);
    const check = current?.spotCheck;
    const fromVerifier = check?.verifierMachineId === e.machineId && check.verifierContainerId === e.containerId;
    if (!current || !check || !fromVerifier)
      return { accepted: false, detail: `machine ${e.machineId} (container ${e.containerId}) was not asked to check task ${e.taskId}` };
    const checkedAt = new Date().toISOString();
    const change: Parameters<TasksRepository['settleSpotCheck']>[2] =
      e.outcome === 'ok' && e.resultSha256
        ? { state: e.resultSha256 === check.resultSha256 ? 'agreed' : 'disagreed', verifierSha256: e.resultSha256, checkedAt }
        : { state: 'failed', reason: `the verifier's run gave no result: ${e.error ?? 'no digest'}`, checkedAt };
    const changed = await this.tasks.settleSpotCheck(e.taskId, { machineId: e.machineId, containerId: e.containerId }, change);
    if (changed?.spotCheck) spotCheckVerdicts.inc({ outcome: changed.spotCheck.state });
    // Settled already (a redelivery after a crash before the fact was told): told again, same id.
    const settled = changed ?? current;
    await this.tell(e.taskId, settled);
    return { accepted: true };
  }

  private async tell(taskId: string, { workspaceId, deploymentId, spotCheck: c }: SpotCheckOfTask): Promise<void> {
    if (!c || (c.state !== 'agreed' && c.state !== 'disagreed')) return;
    if (c.state === 'disagreed')
      this.logger.warn(
        { taskId, machineId: c.machineId, verifier: c.verifierMachineId },
        `task ${taskId}: the result of ${c.machineId} disagrees with its verifier`,
      );
    await this.messaging.publish(
      TASK_SPOT_CHECK_ENDED,
      {
        taskId,
        workspaceId,
        deploymentId,
        machineId: c.machineId,
        verifierMachineId: c.verifierMachineId!,
        verdict: c.state,
        at: c.checkedAt!,
      },
      { msgId: `${taskId}:spot-check-ended` },
    );
  }
}
