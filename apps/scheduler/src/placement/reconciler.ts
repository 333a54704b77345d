import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { CONTAINER_FAILED, CONTAINER_SCHEDULED, pullsTasks, type ResolvedSpec } from '#tern/contracts';
import { Messaging, RequestError, taskConsumerSpec } from '#tern/messaging';
import { ContainersRepository, type LostContainer, type VersionToReconcile } from '#tern/persistence';
import { crashWaitMs, isCrashLooping, PLACEMENT_BACKOFF } from '#tern/placement';
import { AgentCommands } from '../machines/agent-commands.js';
import { MachineFaultRelay } from '../machines/machine-fault-relay.js';
import { type Placed, Placer } from './placer.js';
import { RoomGrowth } from './room-growth.js';
import { RoutePublisher } from './route-publisher.js';
import { containersToStop } from './scale-down.js';
import { isResolvedSpec, placementRequest, startCommand } from './start-command.js';
import { backoffMs, mapLimit, Throttle, Ticker } from '#tern/timing';
import { countPlacementFailure, countStartFailure } from './placement-metrics.js';

const EVERY_MS = 1000;
/** Room freeing wakes the loop at most this often: a deployment's containers stopping together wake it twice, not once each. */
const ROOM_WAKE_GAP_MS = 200;
const STOP_GRACE_SECONDS = 10;
/** Start orders in flight at once for one version's scale-up (each waits for its agent's answer). */
const STARTS_AT_ONCE = 16;
/** States that count as a running instance of the version (stopping ones no longer do). */
const ACTIVE = ['scheduled', 'starting', 'running'];

/**
 * Desired against actual, every second and at once when woken (a scale command, a machine
 * change). Each version is reconciled under a Postgres advisory lock, so with two scheduler
 * replicas one works on a version while the other skips it; placement itself locks the chosen
 * machines' rows and checks their generations (see Placer), so different versions never
 * overbook a machine either.
 * A version that found no room waits 1 s, doubling to 30 s, before it tries again, unless room
 * grows in its pool first: every pass asks RoomGrowth, which reads Postgres, so room freed by any
 * cause, seen by any replica, cuts the wait short within a pass; a container's end wakes a pass at
 * once (roomFreed, at most one per 200 ms), a machine becoming ready clears every back-off
 * (resetBackoff). A version whose
 * containers crash waits CONTAINER_CRASH_BACKOFF_* after its last crash (crashWaitMs), starts one
 * at a time, and, once superseded, stops its containers at once.
 */
@Injectable()
export class Reconciler implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('reconciler');
  private readonly ticker = new Ticker({ name: 'reconcile pass', everyMs: EVERY_MS, logger: this.logger }, () => this.pass());
  /** Versions sitting out a back-off; `roomIn` (their pool) when what failed was finding room, not a start. */
  private readonly backoff = new Map<string, { failures: number; nextAt: number; roomIn?: string }>();
  private readonly roomWake = new Throttle(ROOM_WAKE_GAP_MS, () => this.wake());

  constructor(
    private readonly containers: ContainersRepository,
    private readonly messaging: Messaging,
    private readonly placer: Placer,
    private readonly agents: AgentCommands,
    private readonly routes: RoutePublisher,
    private readonly faults: MachineFaultRelay,
    private readonly room: RoomGrowth,
    @Inject(TERN_CONFIG) private readonly config: TernConfig,
  ) {}

  onApplicationBootstrap() {
    this.ticker.start();
  }

  async onModuleDestroy() {
    this.roomWake.stop();
    await this.ticker.stop();
  }

  /** Runs a pass now, or right after the one under way. */
  wake(): void {
    this.ticker.poke();
  }

  /** A machine became ready: every waiting version may fit there, whatever failed before. */
  resetBackoff(): void {
    this.backoff.clear();
  }

  /**
   * A container ended, so room may have freed: a pass runs now (or 200 ms after the last such
   * wake), and the versions waiting for room in a pool where it grew try again in it.
   */
  roomFreed(): void {
    if (this.backoff.size) this.roomWake.call();
  }

  async pass(): Promise<void> {
    await this.loseOffline();
    const versions = await this.containers.versionsToReconcile(ACTIVE);
    await this.retryWhereRoomGrew(new Set(versions.map((v) => v.id)));
    for (const v of versions) {
      if (this.ticker.stopping) return;
      try {
        await this.containers.withVersionLock(v.id, () => this.reconcile(v));
      } catch (e) {
        this.logger.warn({ versionId: v.id, err: (e as Error).message }, `reconcile of ${v.deploymentId} v${v.version} failed`);
      }
    }
    // Last: their replacements are placed on the next pass, by when reputation has counted the fault.
    await this.failLateStarts();
  }

  /**
   * Versions waiting for room in a pool where room grew (RoomGrowth) try again on this pass; their
   * failures are kept, so a try that still finds none backs off further. Versions backing off
   * after a refused or failed start keep waiting: more room does not fix those. A version no
   * longer to reconcile (its deployment deleted before it found room) stops waiting, so its pool
   * is not looked at for nothing. When the look fails, the back-offs run their course.
   */
  private async retryWhereRoomGrew(current: ReadonlySet<string>): Promise<void> {
    const waiting = new Set<string>();
    for (const [id, wait] of this.backoff) {
      if (!current.has(id)) this.backoff.delete(id);
      else if (wait.roomIn !== undefined) waiting.add(wait.roomIn);
    }
    try {
      const grown = await this.room.poolsGrown(waiting);
      for (const wait of this.backoff.values()) if (wait.roomIn !== undefined && grown.has(wait.roomIn)) wait.nextAt = 0;
    } catch (e) {
      this.logger.warn({ err: (e as Error).message }, `cannot tell where room grew: ${(e as Error).message}`);
    }
  }

  private async reconcile(v: VersionToReconcile): Promise<void> {
    // A superseded version whose containers crash is not kept warm: they stop at once, none start.
    const supersededLoop = !v.latest && isCrashLooping(v, Date.now(), this.config.containers.crashBackoff);
    const stopAll = v.deploymentState === 'stopped' || v.deploymentState === 'deleted' || supersededLoop;
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
      const why = supersededLoop ? 'superseded while crash-looping' : stopAll ? `deployment ${v.deploymentState}` : 'scale-down';
      await this.stop(ids, why);
    }
    this.backoff.delete(v.id);
    await this.setReason(v, null);
  }

  private async scaleUp(v: VersionToReconcile, missing: number): Promise<void> {
    if (!isResolvedSpec(v.spec)) return this.setReason(v, 'the version has no resolved spec to place');
    const wait = this.backoff.get(v.id);
    if (wait && wait.nextAt > Date.now()) return;
    const crashBackoff = this.config.containers.crashBackoff;
    const now = Date.now(); // one clock reading: the next start is the last crash plus its back-off, to the millisecond
    const crashWait = crashWaitMs(v, now, crashBackoff);
    if (crashWait > 0) {
      const next = new Date(now + crashWait).toISOString();
      return this.setReason(v, `CrashLoopBackOff: ${v.crashes} container(s) crashed in a row; next start at ${next}`);
    }
    const spec = v.spec;
    const request = placementRequest(spec);
    // While its containers crash, a version gets one new container at a time.
    const count = isCrashLooping(v, now, crashBackoff) ? 1 : missing;
    const { placed, unplaced } = await this.placer.reserveMany(v.id, request, count, 'scale-up');
    for (const p of placed) {
      this.logger.log(
        { containerId: p.containerId, machineId: p.machineId },
        `placed ${p.containerId} of ${v.deploymentId} v${v.version} on ${p.machineId}`,
      );
    }
    const noConsumer = await this.declareTaskConsumer(v, placed);
    if (noConsumer) return this.fail(v, noConsumer);
    // Every reserved container gets its start order, a few at a time: a refusal fails only its own.
    const refusals = await mapLimit(placed, STARTS_AT_ONCE, (p) => this.start(v, spec, p));
    const refused = refusals.find((r) => r !== undefined);
    if (refused) return this.fail(v, refused);
    if (unplaced) {
      countPlacementFailure(unplaced);
      this.logger.warn({ versionId: v.id, reason: unplaced }, `cannot place ${v.deploymentId} v${v.version}: ${unplaced}`);
      return this.fail(v, unplaced, { roomIn: request.pool });
    }
    this.backoff.delete(v.id);
    await this.setReason(v, null);
  }

  /**
   * The version's task consumer, declared once before any of its containers pulls from it (agents
   * do not declare it). When it cannot be, the reserved containers are marked failed and why is returned.
   */
  private async declareTaskConsumer(v: VersionToReconcile, placed: readonly Placed[]): Promise<string | undefined> {
    if (!pullsTasks(v.kind) || !placed.length) return undefined;
    try {
      await this.messaging.ensureConsumer(taskConsumerSpec(v.deploymentId, v.version));
      return undefined;
    } catch (e) {
      const why = (e as Error).message;
      for (const p of placed) await this.containers.markStartFailed(p.containerId, `cannot declare its task consumer: ${why}`);
      return `cannot declare the task consumer of ${v.deploymentId} v${v.version}: ${why}`;
    }
  }

  /** Sends the start order; on refusal or error marks the container failed and returns why. */
  private async start(v: VersionToReconcile, spec: ResolvedSpec, placed: Placed): Promise<string | undefined> {
    const target = {
      containerId: placed.containerId,
      deploymentId: v.deploymentId,
      deploymentVersion: v.version,
      workspaceId: v.workspaceId,
      kind: v.kind,
      gpuType: placed.gpuType,
    };
    const command = startCommand(spec, target, new Date());
    const event = {
      containerId: placed.containerId,
      deploymentId: v.deploymentId,
      deploymentVersion: v.version,
      workspaceId: v.workspaceId,
      machineId: placed.machineId,
      at: command.requestedAt,
    };
    // Sent before the start order on the same connection, so it reaches NATS first (reputation
    // times the start from it), but its ack is not waited for: the agent hears the start sooner.
    const scheduled = this.messaging
      .publish(
        CONTAINER_SCHEDULED,
        { ...event, resources: command.resources, reason: 'scale-up' },
        { msgId: `${placed.containerId}:scheduled` },
      )
      .catch((e: unknown) => this.logger.warn(`could not announce ${placed.containerId} scheduled: ${(e as Error).message}`));
    let reason: string;
    let unanswered = false;
    try {
      const [reply] = await Promise.all([this.agents.start(placed.machineId, command), scheduled]);
      if (reply.accepted) return undefined;
      reason = `machine ${placed.machineId} refused the start: ${reply.reason ?? 'no reason given'}`;
    } catch (e) {
      reason = `start on machine ${placed.machineId} failed: ${(e as Error).message}`;
      // No agent listening (503) or no answer in time (504): the machine's fault, as the control plane saw it.
      unanswered = e instanceof RequestError && (e.code === 503 || e.code === 504);
      // A timeout may hide a start the agent did take on: tell it to drop the container.
      if (e instanceof RequestError && e.code === 504) {
        void this.agents
          .stop(placed.machineId, { containerId: placed.containerId, graceSeconds: 0, reason: 'start timed out' })
          .catch(() => undefined);
      }
    }
    countStartFailure();
    await this.containers.markStartFailed(placed.containerId, reason, unanswered ? 'start-unanswered' : undefined);
    if (unanswered) this.faults.poke();
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

  /**
   * The start limit, enforced here and not left to the agent: a container not ready
   * CONTAINER_START_LIMIT_SECONDS after its placement is failed (its reason says why), its fault
   * goes to reputation, its agent is told to drop it, and the next pass places a replacement.
   */
  private async failLateStarts(): Promise<void> {
    const late = await this.containers.failStartsPastLimit(this.config.containers.startLimitSeconds);
    if (!late.length) return;
    this.faults.poke();
    this.roomFreed();
    await this.routes.remove(late.map((c) => c.id));
    for (const c of late) {
      this.logger.warn({ containerId: c.id, machineId: c.machineId }, `container ${c.id} failed: ${c.stateReason}`);
      void this.agents
        .stop(c.machineId, { containerId: c.id, graceSeconds: 0, reason: 'not ready within the start limit' })
        .catch(() => undefined);
    }
  }

  private async loseOffline(): Promise<void> {
    const lost: LostContainer[] = await this.containers.failOnOfflineMachines();
    if (!lost.length) return;
    this.faults.poke();
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

  private async fail(v: VersionToReconcile, reason: string, { roomIn }: { roomIn?: string } = {}): Promise<void> {
    const failures = (this.backoff.get(v.id)?.failures ?? 0) + 1;
    const nextAt = Date.now() + backoffMs(failures, PLACEMENT_BACKOFF);
    this.backoff.set(v.id, roomIn === undefined ? { failures, nextAt } : { failures, nextAt, roomIn });
    await this.setReason(v, reason);
  }

  private async setReason(v: VersionToReconcile, reason: string | null): Promise<void> {
    if (v.placementReason === reason) return;
    await this.containers.setPlacementReason(v.id, reason);
    v.placementReason = reason;
  }
}
