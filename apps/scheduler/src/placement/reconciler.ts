import { Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { CONTAINER_FAILED, CONTAINER_SCHEDULED, type DeploymentKind, type ResolvedSpec } from '#tern/contracts';
import { Messaging, RequestError } from '#tern/messaging';
import { queryRows } from '#tern/persistence';
import { backoffMs } from '#tern/placement';
import { AgentCommands } from '../machines/agent-commands.js';
import { type PlaceOutcome, Placer } from './placer.js';
import { RouteTable } from './route-table.js';
import { containersToStop } from './scale-down.js';
import { isResolvedSpec, placementRequest, startCommand } from './start-command.js';

const EVERY_MS = 1000;
const STOP_GRACE_SECONDS = 10;
/** States that count as a running instance of the version (stopping ones no longer do). */
const ACTIVE = ['scheduled', 'starting', 'running'];

interface VersionRow {
  id: string;
  deployment_id: string;
  version: number;
  spec: unknown;
  desired_containers: number;
  idle_containers: string[];
  placement_reason: string | null;
  workspace_id: string;
  kind: DeploymentKind;
  deployment_state: string;
}

const VERSIONS = `
  SELECT dv.id, dv.deployment_id::text AS deployment_id, dv.version, dv.spec, dv.desired_containers, dv.idle_containers,
         dv.placement_reason, d.workspace_id::text AS workspace_id, d.kind, d.state AS deployment_state
  FROM deployment_versions dv JOIN deployments d ON d.id = dv.deployment_id
  WHERE dv.desired_containers > 0
     OR EXISTS (SELECT 1 FROM containers c WHERE c.deployment_version_id = dv.id AND c.state = ANY($1::text[]))
  ORDER BY dv.id`;

/** Containers whose machine went offline (or was removed) are lost; the loop replaces them. */
const LOSE_OFFLINE = `
  UPDATE containers c
  SET state = 'failed', state_reason = CASE WHEN c.machine_id IS NULL THEN 'machine removed' ELSE 'machine offline' END,
      stopped_at = COALESCE(c.stopped_at, now()), updated_at = now()
  FROM deployment_versions dv, deployments d
  WHERE dv.id = c.deployment_version_id AND d.id = dv.deployment_id
    AND c.state IN ('pending', 'scheduled', 'starting', 'running', 'stopping')
    AND (c.machine_id IS NULL OR c.machine_id IN (SELECT id FROM machines WHERE state = 'offline'))
  RETURNING c.id, c.machine_id, c.state_reason, dv.deployment_id::text AS deployment_id, dv.version, d.workspace_id::text AS workspace_id`;

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
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private again = false;
  private stopped = false;
  private readonly backoff = new Map<string, { failures: number; nextAt: number }>();

  constructor(
    private readonly dataSource: DataSource,
    private readonly messaging: Messaging,
    private readonly placer: Placer,
    private readonly agents: AgentCommands,
    private readonly routes: RouteTable,
  ) {}

  onApplicationBootstrap() {
    this.timer = setInterval(() => this.wake(), EVERY_MS);
  }

  async onModuleDestroy() {
    this.stopped = true;
    clearInterval(this.timer);
    await this.running;
  }

  /** Runs a pass now, or right after the one under way. */
  wake(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.pass()
      .catch((e: unknown) => this.logger.warn(`reconcile pass failed (${(e as Error).message}); retrying on the next tick`))
      .finally(() => {
        this.running = undefined;
        if (this.again) {
          this.again = false;
          this.wake();
        }
      });
  }

  resetBackoff(): void {
    this.backoff.clear();
  }

  async pass(): Promise<void> {
    await this.loseOffline();
    const versions = await this.query<VersionRow>(VERSIONS, [ACTIVE]);
    for (const v of versions) {
      if (this.stopped) return;
      try {
        await this.withVersionLock(v.id, () => this.reconcile(v));
      } catch (e) {
        this.logger.warn({ versionId: v.id, err: (e as Error).message }, `reconcile of ${v.deployment_id} v${v.version} failed`);
      }
    }
  }

  private async reconcile(v: VersionRow): Promise<void> {
    const stopAll = v.deployment_state === 'stopped' || v.deployment_state === 'deleted';
    const desired = stopAll ? 0 : v.desired_containers;
    const active = await this.query<{ id: string; ready_at: Date | null }>(
      `SELECT id, ready_at FROM containers WHERE deployment_version_id = $1 AND state = ANY($2::text[]) ORDER BY created_at, id`,
      [v.id, ACTIVE],
    );
    if (active.length < desired) return this.scaleUp(v, desired - active.length);
    if (active.length > desired) {
      const ids = containersToStop(active.map((c) => ({ id: c.id, ready: c.ready_at !== null })), desired, v.idle_containers ?? [], stopAll);
      await this.stop(ids, stopAll ? `deployment ${v.deployment_state}` : 'scale-down');
    }
    this.backoff.delete(v.id);
    await this.setReason(v, null);
  }

  private async scaleUp(v: VersionRow, missing: number): Promise<void> {
    if (!isResolvedSpec(v.spec)) return this.setReason(v, 'the version has no resolved spec to place');
    const wait = this.backoff.get(v.id);
    if (wait && wait.nextAt > Date.now()) return;
    const spec = v.spec;
    const request = placementRequest(spec);
    for (let i = 0; i < missing; i++) {
      const outcome = await this.placer.reserve(v.id, request, 'scale-up');
      if (!outcome.placed) {
        this.logger.warn({ versionId: v.id, reason: outcome.reason }, `cannot place ${v.deployment_id} v${v.version}: ${outcome.reason}`);
        return this.fail(v, outcome.reason);
      }
      this.logger.log({ containerId: outcome.containerId, machineId: outcome.machineId }, `placed ${outcome.containerId} of ${v.deployment_id} v${v.version} on ${outcome.machineId}`);
      const refused = await this.start(v, spec, outcome);
      if (refused) return this.fail(v, refused);
    }
    this.backoff.delete(v.id);
    await this.setReason(v, null);
  }

  /** Sends the start order; on refusal or error marks the container failed and returns why. */
  private async start(v: VersionRow, spec: ResolvedSpec, placed: Extract<PlaceOutcome, { placed: true }>): Promise<string | undefined> {
    const target = { containerId: placed.containerId, deploymentId: v.deployment_id, deploymentVersion: v.version, workspaceId: v.workspace_id, kind: v.kind, gpuType: placed.gpuType };
    const command = startCommand(spec, target, new Date());
    const event = { containerId: placed.containerId, deploymentId: v.deployment_id, deploymentVersion: v.version, workspaceId: v.workspace_id, machineId: placed.machineId, at: command.requestedAt };
    await this.messaging
      .publish(CONTAINER_SCHEDULED, { ...event, resources: command.resources, reason: 'scale-up' }, { msgId: `${placed.containerId}:scheduled` })
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
        void this.agents.stop(placed.machineId, { containerId: placed.containerId, graceSeconds: 0, reason: 'start timed out' }).catch(() => undefined);
      }
    }
    await this.query(`UPDATE containers SET state = 'failed', state_reason = $2, stopped_at = now(), updated_at = now() WHERE id = $1 AND state = 'scheduled'`, [placed.containerId, reason]);
    this.logger.warn({ containerId: placed.containerId, reason }, reason);
    return reason;
  }

  private async stop(ids: readonly string[], reason: string): Promise<void> {
    for (const id of ids) {
      const [row] = await this.query<{ machine_id: string | null }>(
        `UPDATE containers SET state = 'stopping', state_reason = $2, updated_at = now() WHERE id = $1 AND state = ANY($3::text[]) RETURNING machine_id`,
        [id, reason, ACTIVE],
      );
      if (!row) continue;
      await this.routes.remove([id]);
      if (!row.machine_id) continue;
      try {
        const reply = await this.agents.stop(row.machine_id, { containerId: id, graceSeconds: STOP_GRACE_SECONDS, reason });
        if (!reply.accepted) this.logger.warn({ containerId: id }, `machine ${row.machine_id} refused to stop ${id}: ${reply.reason ?? 'no reason given'}`);
      } catch (e) {
        this.logger.warn({ containerId: id }, `stop of ${id} on ${row.machine_id} failed: ${(e as Error).message}`);
      }
      this.logger.log({ containerId: id, machineId: row.machine_id, reason }, `stopping ${id} (${reason})`);
    }
  }

  private async loseOffline(): Promise<void> {
    const lost = await this.query<{ id: string; machine_id: string | null; state_reason: string; deployment_id: string; version: number; workspace_id: string }>(LOSE_OFFLINE);
    if (!lost.length) return;
    await this.routes.remove(lost.map((c) => c.id));
    for (const c of lost) {
      this.logger.warn({ containerId: c.id, machineId: c.machine_id }, `container ${c.id} lost: ${c.state_reason}`);
      if (!c.machine_id) continue;
      const event = { containerId: c.id, deploymentId: c.deployment_id, deploymentVersion: c.version, workspaceId: c.workspace_id, machineId: c.machine_id, at: new Date().toISOString() };
      await this.messaging
        .publish(CONTAINER_FAILED, { ...event, phase: 'machine-lost', error: c.state_reason }, { msgId: `${c.id}:failed:machine-lost` })
        .catch((e: unknown) => this.logger.warn(`could not announce ${c.id} lost: ${(e as Error).message}`));
    }
  }

  private async fail(v: VersionRow, reason: string): Promise<void> {
    const failures = (this.backoff.get(v.id)?.failures ?? 0) + 1;
    this.backoff.set(v.id, { failures, nextAt: Date.now() + backoffMs(failures) });
    await this.setReason(v, reason);
  }

  private async setReason(v: VersionRow, reason: string | null): Promise<void> {
    if (v.placement_reason === reason) return;
    await this.query(`UPDATE deployment_versions SET placement_reason = $2 WHERE id = $1`, [v.id, reason]);
    v.placement_reason = reason;
  }

  /** Runs `work` holding the version's session advisory lock, or skips it when another replica holds it. */
  private async withVersionLock(versionId: string, work: () => Promise<void>): Promise<void> {
    const runner = this.dataSource.createQueryRunner();
    const key = `tern.reconcile:${versionId}`;
    try {
      const [{ locked }] = await queryRows<{ locked: boolean }>(runner, `SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS locked`, [key]);
      if (!locked) return;
      try {
        await work();
      } finally {
        await runner.query(`SELECT pg_advisory_unlock(hashtextextended($1, 0))`, [key]);
      }
    } finally {
      await runner.release();
    }
  }

  private async query<T>(sql: string, params: unknown[] = []): Promise<T[]> {
    const runner = this.dataSource.createQueryRunner();
    try {
      return await queryRows<T>(runner, sql, params);
    } finally {
      await runner.release();
    }
  }
}
