import { Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { CONTAINER_FAILED, CONTAINER_SCHEDULED, pullsTasks, type ResolvedSpec } from '#tern/contracts';
import { Messaging, RequestError, taskConsumerSpec } from '#tern/messaging';
import { ContainersRepository, type LostContainer, type VersionToReconcile } from '#tern/persistence';
import { PLACEMENT_BACKOFF } from '#tern/placement';
import { AgentCommands } from '../machines/agent-commands.js';
import { type PlaceOutcome, Placer } from './placer.js';
import { RoutePublisher } from './route-publisher.js';
import { containersToStop } from './scale-down.js';
import { isResolvedSpec, placementRequest, startCommand } from './start-command.js';
import { backoffMs, Ticker } from '#tern/timing';
import { countPlacementFailure, countStartFailure } from './placement-metrics.js';

const EVERY_MS = 1000;
const STOP_GRACE_SECONDS = 10;
/** States that count as a running instance of the version (stopping ones no longer do). */
const ACTIVE = ['scheduled', 'starting', 'running'];

/**
 * Desired against actual, every second and at once when woken (a scale command, a machine
 * change). Each version is reconciled under a Postgres advisory lock, so with two scheduler
 * replicas one works on a version while the other skips it; placement itself also locks the
 * pool's machine rows (see Placer), so different versions never overbook a machine either.
 * A version that found no room waits 1 s, doubling to 30 s, before it tries again.
 */
@Injectable()
export class Reconciler implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('reconciler');
  private readonly ticker = new Ticker({ name: 'reconcile pass', everyMs: EVERY_MS, logger: this.logger }, () => this.pass());
  private readonly backoff = new Map<string, { failures: number; nextAt: number }>();

  constructor(
    private readonly containers: ContainersRepository,
    private readonly messaging: Messaging,
    private readonly placer: Placer,
    private readonly agents: AgentCommands,
    private readonly routes: RoutePublisher,
  ) {}

  onApplicationBootstrap() {
    this.ticker.start();
  }

  async onModuleDestroy() {
    await this.ticker.stop();
  }

  /** Runs a pass now, or right after the one under way. */
  wake(): void {
    this.ticker.poke();
  }

  resetBackoff(): void {
    this.backoff.clear();
  }

  async pass(): Promise<void> {
    await this.loseOffline();
    const versions = await this.containers.versionsToReconcile(ACTIVE);
    for (const v of versions) {
      if (this.ticker.stopping) return;
      try {
        await this.containers.withVersionLock(v.id, () => this.reconcile(v));
      } catch (e) {
        this.logger.warn({ versionId: v.id, err: (e as Error).message }, `reconcile of ${v.deploymentId} v${v.version} failed`);
      }
    }
  }

  private async reconcile(v: VersionToReconcile): Promise<void> {
    const stopAll = v.deploymentState === 'stopped' || v.deploymentState === 'deleted';
    const desired = stopAll ? 0 : v.desiredContainers;
    const active = await this.containers.activeOf(v.id, ACTIVE);
    if (active.length < desired) return this.scaleUp(v, desired - active.length);
    if (active.length > desired) {
      const ids = containersToStop(
        active.map((c) => ({ id: c.id, ready: c.readyAt !== null })),
        desired,
        v.idleContainers ?? [],
        stopAll,
      );
      await this.stop(ids, stopAll ? `deployment ${v.deploymentState}` : 'scale-down');
    }
    this.backoff.delete(v.id);
    await this.setReason(v, null);
  }

  private async scaleUp(v: VersionToReconcile, missing: number): Promise<void> {
    if (!isResolvedSpec(v.spec)) return this.setReason(v, 'the version has no resolved spec to place');
    const wait = this.backoff.get(v.id);
    if (wait && wait.nextAt > Date.now()) return;
    const spec = v.spec;
    const request = placementRequest(spec);
    for (let i = 0; i < missing; i++) {
      const outcome = await this.placer.reserve(v.id, request, 'scale-up');
      if (!outcome.placed) {
        countPlacementFailure(outcome.reason);
        this.logger.warn({ versionId: v.id, reason: outcome.reason }, `cannot place ${v.deploymentId} v${v.version}: ${outcome.reason}`);
        return this.fail(v, outcome.reason);
      }
      this.logger.log(
        { containerId: outcome.containerId, machineId: outcome.machineId },
        `placed ${outcome.containerId} of ${v.deploymentId} v${v.version} on ${outcome.machineId}`,
      );
      const refused = await this.start(v, spec, outcome);
      if (refused) return this.fail(v, refused);
    }
    this.backoff.delete(v.id);
    await this.setReason(v, null);
  }

  /** Sends the start order; on refusal or error marks the container failed and returns why. */
  private async start(
    v: VersionToReconcile,
    spec: ResolvedSpec,
    placed: Extract<PlaceOutcome, { placed: true }>,
  ): Promise<string | undefined> {
    const target = {
      containerId: placed.containerId,
      deploymentId: v.deploymentId,
      deploymentVersion: v.version,
      workspaceId: v.workspaceId,
      kind: v.kind,
      gpuType: placed.gpuType,
    };
    const command = startCommand(spec, target, new Date());
    // The version's task consumer exists before any of its containers pulls from it: agents do not declare it.
    if (pullsTasks(v.kind)) {
      try {
        await this.messaging.ensureConsumer(taskConsumerSpec(v.deploymentId, v.version));
      } catch (e) {
        await this.containers.markStartFailed(placed.containerId, `cannot declare its task consumer: ${(e as Error).message}`);
        return `cannot declare the task consumer of ${v.deploymentId} v${v.version}: ${(e as Error).message}`;
      }
    }
    const event = {
      containerId: placed.containerId,
      deploymentId: v.deploymentId,
      deploymentVersion: v.version,
      workspaceId: v.workspaceId,
      machineId: placed.machineId,
      at: command.requestedAt,
    };
    await this.messaging
      .publish(
        CONTAINER_SCHEDULED,
        { ...event, resources: command.resources, reason: 'scale-up' },
        { msgId: `${placed.containerId}:scheduled` },
      )
      .catch((e: unknown) => this.logger.warn(`could not announce ${placed.containerId} scheduled: ${(e as Error).message}`));
    let reason: string;
    try {
      const reply = await this.agents.start(placed.machineId, command);
      if (reply.accepted) return undefined;
      reason = `machine ${placed.machineId} refused the start: ${reply.reason ?? 'no reason given'}`;
    } catch (e) {
      reason = `start on machine ${placed.machineId} failed: ${(e as Error).message}`;
      // A timeout may hide a start the agent did take on: tell it to drop the container.
      if (e instanceof RequestError && e.code === 504) {
        void this.agents
          .stop(placed.machineId, { containerId: placed.containerId, graceSeconds: 0, reason: 'start timed out' })
          .catch(() => undefined);
      }
    }
    countStartFailure();
    await this.containers.markStartFailed(placed.containerId, reason);
    this.logger.warn({ containerId: placed.containerId, reason }, reason);
    return reason;
  }

  private async stop(ids: readonly string[], reason: string): Promise<void> {
    for (const id of ids) {
      const row = await this.containers.markStopping(id, reason, ACTIVE);
      if (!row) continue;
      await this.routes.remove([id]);
      if (!row.machineId) continue;
      try {
        const reply = await this.agents.stop(row.machineId, { containerId: id, graceSeconds: STOP_GRACE_SECONDS, reason });
        if (!reply.accepted)
          this.logger.warn({ containerId: id }, `machine ${row.machineId} refused to stop ${id}: ${reply.reason ?? 'no reason given'}`);
      } catch (e) {
        this.logger.warn({ containerId: id }, `stop of ${id} on ${row.machineId} failed: ${(e as Error).message}`);
      }
      this.logger.log({ containerId: id, machineId: row.machineId, reason }, `stopping ${id} (${reason})`);
    }
  }

  private async loseOffline(): Promise<void> {
    const lost: LostContainer[] = await this.containers.failOnOfflineMachines();
    if (!lost.length) return;
    await this.routes.remove(lost.map((c) => c.id));
    for (const c of lost) {
      this.logger.warn({ containerId: c.id, machineId: c.machineId }, `container ${c.id} lost: ${c.stateReason}`);
      if (!c.machineId) continue;
      const event = {
        containerId: c.id,
        deploymentId: c.deploymentId,
        deploymentVersion: c.version,
        workspaceId: c.workspaceId,
        machineId: c.machineId,
        at: new Date().toISOString(),
      };
      await this.messaging
        .publish(CONTAINER_FAILED, { ...event, phase: 'machine-lost', error: c.stateReason }, { msgId: `${c.id}:failed:machine-lost` })
        .catch((e: unknown) => this.logger.warn(`could not announce ${c.id} lost: ${(e as Error).message}`));
    }
  }

  private async fail(v: VersionToReconcile, reason: string): Promise<void> {
    const failures = (this.backoff.get(v.id)?.failures ?? 0) + 1;
    this.backoff.set(v.id, { failures, nextAt: Date.now() + backoffMs(failures, PLACEMENT_BACKOFF) });
    await this.setReason(v, reason);
  }

  private async setReason(v: VersionToReconcile, reason: string | null): Promise<void> {
    if (v.placementReason === reason) return;
    await this.containers.setPlacementReason(v.id, reason);
    v.placementReason = reason;
  }
}
