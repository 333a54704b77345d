import { Injectable } from '@nestjs/common';
import { TransactionalRepository } from './transactional.repository.js';
import { DataSource } from 'typeorm';
import { type MachineFaultKind } from '#tern/contracts';
import { SANDBOX_HOLDING_STATES } from '../entities/sandbox.entity.js';
import { queryRows } from '../query-rows.js';
import type {
  ContainerPlacement,
  ContainerProgressColumns,
  DesiredContainers,
  HeldResources,
  LostContainer,
  MachineGeneration,
  PlacementMachine,
  RouteSource,
  RunningContainer,
  ScheduledContainer,
  VersionToReconcile,
} from './containers/container-rows.js';
import { faultsOfFailed } from './machine-faults.repository.js';

export type * from './containers/container-rows.js';

/** The states of a container that holds its place on a machine (not yet stopped or failed). */
const ON_MACHINE = `c.state IN ('pending', 'scheduled', 'starting', 'running', 'stopping')`;

/**
 * Forward-only: the state moves only to a later one in `order`, timestamps keep the earliest
 * value seen (each event type has its own consumer, so they arrive in any order; LEAST ignores
 * NULL), the exit code its last known one. The machine is set only if it still exists (a
 * removed machine must not make the event fail on the foreign key). `requested` is merged, so
 * what the agent reports keeps the GPU indexes the scheduler reserved.
 */
const APPLY_PROGRESS = `
  UPDATE containers c SET
    state = CASE WHEN array_position($11::text[], $3::text) > array_position($11::text[], c.state::text) THEN $3::varchar ELSE c.state END,
    state_reason = CASE WHEN array_position($11::text[], $3::text) > array_position($11::text[], c.state::text) THEN $4::text ELSE c.state_reason END,
    machine_id = COALESCE((SELECT id FROM machines WHERE id = $2::text), c.machine_id),
    requested = c.requested || COALESCE($5::jsonb, '{}'::jsonb),
    started_at = LEAST(c.started_at, $6::timestamptz),
    ready_at = LEAST(c.ready_at, $7::timestamptz),
    stopped_at = LEAST(c.stopped_at, $8::timestamptz),
    exit_code = COALESCE($9::int, c.exit_code),
    oom_killed = c.oom_killed OR COALESCE($10::boolean, false),
    updated_at = now()
  WHERE c.id = $1::text
  RETURNING c.id`;

/**
 * First event for a container the scheduler has no row for. The row needs its deployment
 * version, found from the event's deployment id and version number. `requested` is {} until an
 * event that carries the resources (scheduled, started) arrives.
 */
const INSERT_FROM_EVENT = `
  INSERT INTO containers (id, deployment_version_id, machine_id, state, state_reason, requested, started_at, ready_at, stopped_at, exit_code, oom_killed)
  SELECT $1::text, dv.id, (SELECT id FROM machines WHERE id = $2::text), $3::varchar, $4::text, COALESCE($5::jsonb, '{}'::jsonb),
         $6::timestamptz, $7::timestamptz, $8::timestamptz, $9::int, COALESCE($10::boolean, false)
  FROM deployment_versions dv
  WHERE dv.deployment_id::text = $11::text AND dv.version = $12::int
  ON CONFLICT (id) DO NOTHING
  RETURNING id`;

const VERSIONS_TO_RECONCILE = `
  SELECT dv.id, dv.deployment_id::text AS "deploymentId", dv.version, dv.spec, dv.desired_containers AS "desiredContainers",
         dv.idle_containers AS "idleContainers", dv.placement_reason AS "placementReason", d.workspace_id::text AS "workspaceId",
         d.kind, d.state AS "deploymentState", dv.version = d.latest_version AS latest, dv.crash_count AS crashes,
         dv.last_crash_at AS "lastCrashAt"
  FROM deployment_versions dv JOIN deployments d ON d.id = dv.deployment_id
  WHERE dv.desired_containers > 0
     OR EXISTS (SELECT 1 FROM containers c WHERE c.deployment_version_id = dv.id AND c.state = ANY($1::text[]))
  ORDER BY dv.id`;

/** Containers whose machine went offline (or was removed) are lost; the reconciler replaces them. */
const FAIL_ON_OFFLINE_MACHINES = `
  WITH failed AS (
    UPDATE containers c
    SET state = 'failed', state_reason = CASE WHEN c.machine_id IS NULL THEN 'machine removed' ELSE 'machine offline' END,
        stopped_at = COALESCE(c.stopped_at, now()), updated_at = now()
    WHERE c.state IN ('pending', 'scheduled', 'starting', 'running', 'stopping')
      AND (c.machine_id IS NULL OR c.machine_id IN (SELECT id FROM machines WHERE state = 'offline'))
    RETURNING c.id, c.machine_id, c.ready_at, c.state_reason, c.deployment_version_id
  ), ${faultsOfFailed(`'container-lost'`)}
  SELECT f.id, f.machine_id AS "machineId", f.state_reason AS "stateReason", dv.deployment_id::text AS "deploymentId", dv.version,
         d.workspace_id::text AS "workspaceId"
  FROM failed f JOIN deployment_versions dv ON dv.id = f.deployment_version_id JOIN deployments d ON d.id = dv.deployment_id`;

/**
 * Fails the containers placed on a machine more than $1 seconds ago that are not ready yet (the
 * scheduler's start limit), each with its fault in the outbox. Rows another replica is failing
 * are skipped.
 */
const FAIL_STARTS_PAST_LIMIT = `
  WITH late AS (
    SELECT c.id, l.secs FROM containers c
    JOIN deployment_versions dv ON dv.id = c.deployment_version_id
    CROSS JOIN LATERAL (SELECT GREATEST($1::int, COALESCE((dv.spec->>'startupTimeoutSeconds')::int + 180, 0)) AS secs) l
    WHERE c.state IN ('scheduled', 'starting', 'running') AND c.ready_at IS NULL AND c.machine_id IS NOT NULL
      AND c.created_at < now() - make_interval(secs => l.secs)
    ORDER BY c.id FOR UPDATE OF c SKIP LOCKED
  ), failed AS (
    UPDATE containers c
    SET state = 'failed', stopped_at = COALESCE(c.stopped_at, now()), updated_at = now(),
        state_reason = 'not ready within ' || late.secs || ' s of its placement on machine ' || c.machine_id
          || ' (the start limit; last state ' || c.state || ')'
    FROM late WHERE c.id = late.id
    RETURNING c.id, c.machine_id, c.ready_at, c.state_reason, c.deployment_version_id
  ), ${faultsOfFailed(`'start-not-ready'`)}
  SELECT id, machine_id AS "machineId", state_reason AS "stateReason" FROM failed`;

const ROUTE_SOURCES = `
  SELECT c.id, c.machine_id AS "machineId", c.state, c.ready_at AS "readyAt", dv.deployment_id::text AS "deploymentId", dv.version, dv.spec
  FROM containers c JOIN deployment_versions dv ON dv.id = c.deployment_version_id`;

/**
 * Applies a scale command only if it is newer than the one the version holds (commands can be
 * redelivered or overtake each other): the stored issuedAt is the version's desired_at. A
 * changed count is also kept as a scale event (`before` reads the row as it was).
 */
const APPLY_DESIRED = `
  WITH before AS (
    SELECT id, desired_containers FROM deployment_versions WHERE deployment_id::text = $1 AND version = $2
  ), applied AS (
    UPDATE deployment_versions dv
    SET desired_containers = $3::int, desired_reason = $4::text, desired_at = $5::timestamptz, idle_containers = $6::text[]
    WHERE dv.deployment_id::text = $1 AND dv.version = $2 AND (dv.desired_at IS NULL OR dv.desired_at < $5::timestamptz)
    RETURNING dv.id, dv.deployment_id, dv.version
  ), recorded AS (
    INSERT INTO scale_events (deployment_id, version, at, desired, previous, reason)
    SELECT a.deployment_id, a.version, $5::timestamptz, $3::int, b.desired_containers, $4::text
    FROM applied a JOIN before b ON b.id = a.id WHERE b.desired_containers <> $3::int
  )
  SELECT id FROM applied`;

function progressValues(containerId: string, machineId: string, p: ContainerProgressColumns): unknown[] {
  return [
    containerId,
    machineId,
    p.state,
    p.reason,
    p.requested ? JSON.stringify(p.requested) : null,
    p.startedAt ?? null,
    p.readyAt ?? null,
    p.stoppedAt ?? null,
    p.exitCode ?? null,
    p.oomKilled ?? null,
  ];
}

/** Every statement on containers (placement records and their lifecycle). */
@Injectable()
export class ContainersRepository extends TransactionalRepository {
  constructor(db: DataSource) {
    super(db);
  }

  // --- Lifecycle events ---------------------------------------------------------------------

  /** Applies an event's progress to the container's row (see APPLY_PROGRESS); false when there is no row. */
  async applyProgress(
    containerId: string,
    machineId: string,
    progress: ContainerProgressColumns,
    stateOrder: readonly string[],
  ): Promise<boolean> {
    return (await this.rows(APPLY_PROGRESS, [...progressValues(containerId, machineId, progress), stateOrder])).length > 0;
  }

  /**
   * Inserts the container's row from its first event; false when a row exists already (another
   * replica inserted it a moment ago) or the deployment version is unknown.
   */
  async insertFromEvent(
    containerId: string,
    machineId: string,
    progress: ContainerProgressColumns,
    deploymentId: string,
    deploymentVersion: number,
  ): Promise<boolean> {
    return (
      (await this.rows(INSERT_FROM_EVENT, [...progressValues(containerId, machineId, progress), deploymentId, deploymentVersion])).length >
      0
    );
  }

  /**
   * Of the containers machines say they run, those the scheduler has given up (a state in
   * `givenUp`) or placed on another machine than the one running it: one statement for many
   * machines' heartbeats.
   */
  unwantedAmong(running: readonly RunningContainer[], givenUp: readonly string[]): Promise<RunningContainer[]> {
    return this.rows<RunningContainer>(
      `SELECT r.machine_id AS "machineId", c.id AS "containerId"
         FROM unnest($1::text[], $2::text[]) AS r(machine_id, container_id)
         JOIN containers c ON c.id = r.container_id
        WHERE c.state = ANY($3) OR c.machine_id IS DISTINCT FROM r.machine_id`,
      [running.map((r) => r.machineId), running.map((r) => r.containerId), givenUp],
    );
  }

  // --- Reconciliation -----------------------------------------------------------------------

  /** Versions that want containers, or still have some in an `active` state, by id. */
  versionsToReconcile(active: readonly string[]): Promise<VersionToReconcile[]> {
    return this.rows<VersionToReconcile>(VERSIONS_TO_RECONCILE, [active]);
  }

  /** The version's containers in an `active` state, oldest first. */
  activeOf(versionId: string, active: readonly string[]): Promise<{ id: string; readyAt: Date | null }[]> {
    return this.rows(
      `SELECT id, ready_at AS "readyAt" FROM containers WHERE deployment_version_id = $1 AND state = ANY($2::text[]) ORDER BY created_at, id`,
      [versionId, active],
    );
  }

  /** Fails every unfinished container whose machine is offline or removed (see FAIL_ON_OFFLINE_MACHINES). */
  failOnOfflineMachines(): Promise<LostContainer[]> {
    return this.rows<LostContainer>(FAIL_ON_OFFLINE_MACHINES);
  }

  /**
   * Fails a container whose start was refused or failed, if it is still scheduled. With `fault`
   * (the machine never answered), the fault enters the outbox in the same statement.
   */
  async markStartFailed(containerId: string, reason: string, fault?: MachineFaultKind): Promise<void> {
    await this.rows(
      `WITH failed AS (
         UPDATE containers SET state = 'failed', state_reason = $2, stopped_at = now(), updated_at = now()
         WHERE id = $1 AND state = 'scheduled'
         RETURNING id, machine_id, ready_at, state_reason, deployment_version_id
       ), ${faultsOfFailed('$3::text')}
       SELECT id FROM failed`,
      [containerId, reason, fault ?? null],
    );
  }

  /**
   * Fails every container not ready `limitSeconds` after its placement (or its spec's
   * startup_timeout + 180 s, when longer; see FAIL_STARTS_PAST_LIMIT), its fault in the outbox; returns them.
   */
  failStartsPastLimit(limitSeconds: number): Promise<{ id: string; machineId: string; stateReason: string }[]> {
    return this.rows(FAIL_STARTS_PAST_LIMIT, [limitSeconds]);
  }

  /** Moves a container in an `active` state to stopping; undefined when it was in none (already stopping, or gone). */
  async markStopping(containerId: string, reason: string, active: readonly string[]): Promise<{ machineId: string | null } | undefined> {
    const [row] = await this.rows<{ machineId: string | null }>(
      `UPDATE containers SET state = 'stopping', state_reason = $2, updated_at = now() WHERE id = $1 AND state = ANY($3::text[]) RETURNING machine_id AS "machineId"`,
      [containerId, reason, active],
    );
    return row;
  }

  /** Why the version is short of containers (null: it is not). */
  async setPlacementReason(versionId: string, reason: string | null): Promise<void> {
    await this.rows(`UPDATE deployment_versions SET placement_reason = $2 WHERE id = $1`, [versionId, reason]);
  }

  /**
   * Runs `work` holding the version's session advisory lock on a connection of its own, or
   * skips it when another replica holds the lock. Returns whether `work` ran.
   */
  async withVersionLock(versionId: string, work: () => Promise<void>): Promise<boolean> {
    const runner = this.db.createQueryRunner();
    const key = `tern.reconcile:${versionId}`;
    try {
      const [{ locked }] = await queryRows<{ locked: boolean }>(runner, `SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS locked`, [
        key,
      ]);
      if (!locked) return false;
      try {
        await work();
      } finally {
        await runner.query(`SELECT pg_advisory_unlock(hashtextextended($1, 0))`, [key]);
      }
      return true;
    } finally {
      await runner.release();
    }
  }

  // --- Desired state (deployment_versions, as the scheduler keeps it) -------------------------

  /** Applies the scale command if it is newer than the version's (see APPLY_DESIRED); false when stale or unknown. */
  async applyDesired(d: DesiredContainers): Promise<boolean> {
    const applied = await this.rows(APPLY_DESIRED, [
      d.deploymentId,
      d.deploymentVersion,
      d.desired,
      d.reason,
      d.issuedAt,
      d.idleContainers,
    ]);
    return applied.length > 0;
  }

  async versionExists(deploymentId: string, deploymentVersion: number): Promise<boolean> {
    const known = await this.rows(`SELECT 1 FROM deployment_versions WHERE deployment_id::text = $1 AND version = $2`, [
      deploymentId,
      deploymentVersion,
    ]);
    return known.length > 0;
  }

  /** The scheduler's record of a container's placement; undefined for a container it never placed. */
  async placementOf(containerId: string): Promise<ContainerPlacement | undefined> {
    const [row] = await this.rows<ContainerPlacement>(
      `SELECT c.id, c.machine_id AS "machineId", d.workspace_id::text AS "workspaceId", d.id::text AS "deploymentId", dv.version,
              c.requested, c.created_at AS "placedAt"
       FROM containers c JOIN deployment_versions dv ON dv.id = c.deployment_version_id JOIN deployments d ON d.id = dv.deployment_id
       WHERE c.id = $1`,
      [containerId],
    );
    return row;
  }

  /**
   * Whether a container whose version's spec names code `digest` ("sha256:<hex>") is placed on
   * `machineId` and not stopped: the machine may then fetch that bundle.
   */
  async codePlacedOn(machineId: string, digest: string): Promise<boolean> {
    const rows = await this.rows<{ id: string }>(
      `SELECT c.id FROM containers c JOIN deployment_versions dv ON dv.id = c.deployment_version_id
       WHERE c.machine_id = $1 AND dv.spec->>'code' = $2 AND ${ON_MACHINE}
       LIMIT 1`,
      [machineId, digest],
    );
    return rows.length > 0;
  }

  /**
   * Whether a container whose version's spec names an image of repository `repository`
   * (`host/repo`, the image reference before its `@sha256:` digest) is placed on `machineId` and
   * not stopped, or a live sandbox (placing or running) of that image is: the machine may then
   * pull from that repository.
   */
  async imageRepositoryPlacedOn(machineId: string, repository: string): Promise<boolean> {
    const rows = await this.rows<{ id: string }>(
      `SELECT c.id FROM containers c JOIN deployment_versions dv ON dv.id = c.deployment_version_id
       WHERE c.machine_id = $1 AND split_part(dv.spec->>'image', '@', 1) = $2 AND ${ON_MACHINE}
       UNION ALL
       SELECT s.id FROM sandboxes s
       WHERE s.machine_id = $1 AND split_part(s.spec->>'image', '@', 1) = $2 AND s.state IN ('placing', 'running')
       LIMIT 1`,
      [machineId, repository],
    );
    return rows.length > 0;
  }

  /**
   * Whether a container of task-queue version `version` of `deploymentId` is placed on
   * `machineId` and not stopped: the machine may then pull that version's tasks (its task lane).
   */
  async versionPlacedOn(machineId: string, deploymentId: string, version: number): Promise<boolean> {
    const rows = await this.rows<{ id: string }>(
      `SELECT c.id FROM containers c JOIN deployment_versions dv ON dv.id = c.deployment_version_id
       WHERE c.machine_id = $1 AND dv.deployment_id::text = $2 AND dv.version = $3 AND ${ON_MACHINE}
       LIMIT 1`,
      [machineId, deploymentId, version],
    );
    return rows.length > 0;
  }

  /**
   * Why a version had no container to serve a request that waited since `since`: the reason of
   * its latest start that failed since then, else why placement is short (undefined: neither).
   */
  async whyNoContainer(deploymentId: string, version: number, since: Date): Promise<string | undefined> {
    const rows = await this.rows<{ failed: string | null; placement: string | null }>(
      `SELECT (SELECT c.state_reason FROM containers c
                WHERE c.deployment_version_id = dv.id AND c.state = 'failed' AND c.updated_at >= $3
                ORDER BY c.updated_at DESC LIMIT 1) AS failed,
              dv.placement_reason AS placement
       FROM deployment_versions dv WHERE dv.deployment_id::text = $1 AND dv.version = $2`,
      [deploymentId, version, since],
    );
    const row = rows[0];
    if (row?.failed) return `its last container start failed: ${row.failed}`;
    if (row?.placement) return `no container could be placed: ${row.placement}`;
    return undefined;
  }

  // --- Routes -------------------------------------------------------------------------------

  async routeSourceOf(containerId: string): Promise<RouteSource | undefined> {
    const [row] = await this.rows<RouteSource>(`${ROUTE_SOURCES} WHERE c.id = $1`, [containerId]);
    return row;
  }

  /** Every container that is running, ready and on a machine. */
  routable(): Promise<RouteSource[]> {
    return this.rows<RouteSource>(`${ROUTE_SOURCES} WHERE c.state = 'running' AND c.ready_at IS NOT NULL AND c.machine_id IS NOT NULL`);
  }

  // --- Placement (use inside transaction(): the machine rows stay locked until it ends) ------

  /** The pool's machines, row-locked until the transaction ends. */
  async lockMachinesOfPool(pool: string): Promise<PlacementMachine[]> {
    const rows = await this.rows<Omit<PlacementMachine, 'memoryBytes'> & { memoryBytes: string | null }>(
      `SELECT id, pool, state, cpu_threads AS "cpuThreads", memory_bytes AS "memoryBytes", gpus, verification FROM machines WHERE pool = $1 ORDER BY id FOR UPDATE`,
      [pool],
    );
    return rows.map((r) => ({ ...r, memoryBytes: r.memoryBytes === null ? null : Number(r.memoryBytes) }));
  }

  /**
   * Each machine of the pool with its generation (bumped by the database whenever what placement
   * reads of the machine changes): what the scheduler's in-memory pool compares, to re-read only
   * the machines that changed. Index-only over ix_machines_pool_generation.
   */
  async machineGenerations(pool: string): Promise<MachineGeneration[]> {
    const rows = await this.rows<{ id: string; generation: string }>(`SELECT id, generation FROM machines WHERE pool = $1`, [pool]);
    return rows.map((r) => ({ id: r.id, generation: Number(r.generation) }));
  }

  /** These machines as placement reads them, with their generations; no locks. */
  async placementMachines(ids: readonly string[]): Promise<(PlacementMachine & MachineGeneration)[]> {
    const rows = await this.rows<Omit<PlacementMachine, 'memoryBytes'> & { memoryBytes: string | null; generation: string }>(
      `SELECT id, pool, state, cpu_threads AS "cpuThreads", memory_bytes AS "memoryBytes", gpus, verification, generation FROM machines WHERE id = ANY($1::text[])`,
      [ids],
    );
    return rows.map((r) => ({
      ...r,
      memoryBytes: r.memoryBytes === null ? null : Number(r.memoryBytes),
      generation: Number(r.generation),
    }));
  }

  /**
   * These machines' rows locked until the transaction ends, in id order (as the generation
   * triggers lock them, so no two writers wait on each other in a circle), with their
   * generations as they stand once the locks are held.
   */
  async lockMachines(ids: readonly string[]): Promise<MachineGeneration[]> {
    const rows = await this.rows<{ id: string; generation: string }>(
      `SELECT id, generation FROM machines WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE`,
      [ids],
    );
    return rows.map((r) => ({ id: r.id, generation: Number(r.generation) }));
  }

  /**
   * What the containers in one of `holding` states hold on these machines, and the sandboxes
   * placed or running there (a sandbox is a container the API drives; it holds what it asked for).
   */
  resourcesHeldOn(machineIds: readonly string[], holding: readonly string[]): Promise<HeldResources[]> {
    return this.rows<HeldResources>(
      `SELECT machine_id AS "machineId", requested FROM containers WHERE machine_id = ANY($1::text[]) AND state = ANY($2::text[])
       UNION ALL
       SELECT machine_id AS "machineId", requested FROM sandboxes WHERE machine_id = ANY($1::text[]) AND state = ANY($3::text[])`,
      [machineIds, holding, SANDBOX_HOLDING_STATES],
    );
  }

  /**
   * Of these machines, those where a container of a version running `image` has started: the
   * control plane's own record that the machine pulled it (it may have evicted it since; the
   * answer only steers placement).
   */
  async machinesThatRanImage(machineIds: readonly string[], image: string): Promise<string[]> {
    const rows = await this.rows<{ machineId: string }>(
      `SELECT DISTINCT c.machine_id AS "machineId" FROM containers c JOIN deployment_versions dv ON dv.id = c.deployment_version_id
       WHERE c.machine_id = ANY($1::text[]) AND c.started_at IS NOT NULL AND dv.spec->>'image' = $2`,
      [machineIds, image],
    );
    return rows.map((r) => r.machineId);
  }

  /** The pool's minimum reputation; undefined when it has none (or there is no such pool). */
  async poolMinReputation(pool: string): Promise<number | undefined> {
    const [row] = await this.rows<{ min_reputation: number | null }>(`SELECT min_reputation FROM pools WHERE name = $1`, [pool]);
    return row?.min_reputation === null || row?.min_reputation === undefined ? undefined : Number(row.min_reputation);
  }

  /** The row of a container just placed on a machine, scheduled. */
  insertScheduled(container: ScheduledContainer): Promise<void> {
    return this.insertScheduledMany([container]);
  }

  /** The rows of containers just placed, scheduled: one statement however many. */
  async insertScheduledMany(containers: readonly ScheduledContainer[]): Promise<void> {
    if (!containers.length) return;
    await this.rows(
      `INSERT INTO containers (id, deployment_version_id, machine_id, state, state_reason, requested)
       SELECT c.id, c.version, c.machine, 'scheduled', c.reason, c.requested
       FROM unnest($1::text[], $2::uuid[], $3::text[], $4::text[], $5::jsonb[]) AS c(id, version, machine, reason, requested)`,
      [
        containers.map((c) => c.id),
        containers.map((c) => c.deploymentVersionId),
        containers.map((c) => c.machineId),
        containers.map((c) => c.reason),
        containers.map((c) => JSON.stringify(c.requested)),
      ],
    );
  }
}
