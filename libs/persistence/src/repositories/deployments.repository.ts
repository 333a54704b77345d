import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { DeploymentKind, DeploymentState } from '#tern/contracts';
import { Deployment } from '../entities/deployment.entity.js';
import { DeploymentVersion } from '../entities/deployment-version.entity.js';
import { queryRowsOn } from '../query-rows.js';

/** Container states that count as "actual": placed and not yet on the way out. */
export const ACTIVE_CONTAINER_STATES = ['scheduled', 'starting', 'running'] as const;

/** A deployment with its latest version's placement reason, and desired and actual containers summed over its versions. */
export type DeploymentWithCounts = Pick<Deployment, 'id' | 'name' | 'kind' | 'state' | 'stateReason' | 'latestVersion' | 'updatedAt'> & {
  placementReason: string | null;
  desired: number;
  actual: number;
};

/** A container of a deployment, with the version number it runs. */
export interface DeploymentContainer {
  id: string;
  version: number;
  machineId: string | null;
  state: string;
  stateReason: string | null;
  readyAt: Date | null;
}

/**
 * One step of a deployment's scale history: a desired count set for a version (`desired`), a
 * container that became ready (`up`) or one that stopped after being ready (`down`).
 */
export interface ScaleStep {
  kind: 'desired' | 'up' | 'down';
  at: Date;
  version: number;
  /** desired: the new count; up/down: 1. */
  value: number;
  /** desired: the count before. */
  previous: number | null;
  reason: string | null;
}

/** Endpoint requests of one deployment version in one minute (endpoint_request_minutes). */
export interface RequestMinute {
  deploymentId: string;
  version: number;
  minute: Date;
  requests: number;
  errors: number;
  /** Counts per latency bucket, the last one unbounded. */
  buckets: number[];
}

const ACTIVE = ACTIVE_CONTAINER_STATES.map((s) => `'${s}'`).join(', ');

/** One row per deployment of a workspace (deleted ones left out), desired and actual summed over its versions. */
const WITH_COUNTS_SQL = `
  SELECT d.id, d.name, d.kind, d.state, d.state_reason AS "stateReason", d.latest_version AS "latestVersion", d.updated_at AS "updatedAt", lv.placement_reason AS "placementReason",
    (SELECT coalesce(sum(v.desired_containers), 0)::int FROM deployment_versions v WHERE v.deployment_id = d.id) AS desired,
    (SELECT count(*)::int FROM containers c JOIN deployment_versions v ON v.id = c.deployment_version_id
      WHERE v.deployment_id = d.id AND c.state IN (${ACTIVE})) AS actual
  FROM deployments d
  LEFT JOIN deployment_versions lv ON lv.deployment_id = d.id AND lv.version = d.latest_version
  WHERE d.workspace_id = $1 AND d.state <> 'deleted'`;

/** Every statement on deployments and their versions. */
@Injectable()
export class DeploymentsRepository {
  constructor(private readonly db: DataSource) {}

  /**
   * Writes the next version of the workspace's deployment `name` (created when new) and makes it
   * the latest, ready. Insert-or-keep, then lock the row: concurrent deploys of one name get
   * consecutive versions.
   */
  async addVersion(
    workspaceId: string,
    name: string,
    kind: DeploymentKind,
    spec: Record<string, unknown>,
  ): Promise<{ deployment: Deployment; version: number }> {
    return this.db.transaction(async (m) => {
      await m.query(
        `INSERT INTO deployments (workspace_id, name, kind, state) VALUES ($1, $2, $3, 'pending') ON CONFLICT (workspace_id, name) DO NOTHING`,
        [workspaceId, name, kind],
      );
      const d = await m.getRepository(Deployment).findOneOrFail({ where: { workspaceId, name }, lock: { mode: 'pessimistic_write' } });
      const version = d.latestVersion + 1;
      await m.getRepository(DeploymentVersion).save(m.getRepository(DeploymentVersion).create({ deploymentId: d.id, version, spec }));
      Object.assign(d, { latestVersion: version, kind, state: 'ready', stateReason: null });
      await m.getRepository(Deployment).save(d);
      return { deployment: d, version };
    });
  }

  /** The workspace's deployments (deleted ones left out) by name, with their counts. */
  listWithCounts(workspaceId: string): Promise<DeploymentWithCounts[]> {
    return queryRowsOn<DeploymentWithCounts>(this.db, `${WITH_COUNTS_SQL} ORDER BY d.name`, [workspaceId]);
  }

  async findWithCounts(workspaceId: string, name: string): Promise<DeploymentWithCounts | undefined> {
    const rows = await queryRowsOn<DeploymentWithCounts>(this.db, `${WITH_COUNTS_SQL} AND d.name = $2`, [workspaceId, name]);
    return rows[0];
  }

  /** The deployments (not deleted) whose latest version runs `image` (a pinned reference), with their workspaces. */
  usingImage(image: string): Promise<{ name: string; workspaceId: string; workspaceName: string }[]> {
    return queryRowsOn(
      this.db,
      `SELECT d.name, d.workspace_id AS "workspaceId", w.name AS "workspaceName"
       FROM deployments d JOIN deployment_versions v ON v.deployment_id = d.id AND v.version = d.latest_version
       JOIN workspaces w ON w.id = d.workspace_id
       WHERE d.state <> 'deleted' AND v.spec->>'image' = $1 ORDER BY w.name, d.name`,
      [image],
    );
  }

  /** Deleted ones included: the caller decides what a deleted deployment means. */
  findByName(workspaceId: string, name: string): Promise<Deployment | null> {
    return this.db.getRepository(Deployment).findOneBy({ workspaceId, name });
  }

  findById(id: string): Promise<Deployment> {
    return this.db.getRepository(Deployment).findOneByOrFail({ id });
  }

  /** Every deployment, deleted ones included. */
  listAll(): Promise<Deployment[]> {
    return this.db.getRepository(Deployment).find();
  }

  versionsOf(deploymentId: string, order: 'ASC' | 'DESC'): Promise<DeploymentVersion[]> {
    return this.db.getRepository(DeploymentVersion).find({ where: { deploymentId }, order: { version: order } });
  }

  /** Sets the deployment's state and why (null: no reason), and answers it saved. */
  async setState(deployment: Deployment, state: DeploymentState, reason: string | null): Promise<Deployment> {
    deployment.state = state;
    deployment.stateReason = reason;
    return this.db.getRepository(Deployment).save(deployment);
  }

  /**
   * The deployment's scale history since `from`, oldest first: its scale events, and its
   * containers becoming ready and stopping; also what each version desired and how many
   * containers were ready at `from`, where the steps start from.
   */
  async scaleHistory(deploymentId: string, from: Date): Promise<{ steps: ScaleStep[]; desiredAtStart: number; readyAtStart: number }> {
    const steps = await queryRowsOn<ScaleStep>(
      this.db,
      `SELECT 'desired' AS kind, e.at, e.version, e.desired AS value, e.previous, e.reason FROM scale_events e
         WHERE e.deployment_id = $1 AND e.at >= $2
       UNION ALL
       SELECT 'up', c.ready_at, v.version, 1, NULL, NULL FROM containers c JOIN deployment_versions v ON v.id = c.deployment_version_id
         WHERE v.deployment_id = $1 AND c.ready_at >= $2
       UNION ALL
       SELECT 'down', c.stopped_at, v.version, 1, NULL, c.state_reason FROM containers c JOIN deployment_versions v ON v.id = c.deployment_version_id
         WHERE v.deployment_id = $1 AND c.ready_at IS NOT NULL AND c.stopped_at >= $2
       ORDER BY 2, 1`,
      [deploymentId, from.toISOString()],
    );
    const [start] = await queryRowsOn<{ desired: number; ready: number }>(
      this.db,
      `SELECT
         (SELECT coalesce(sum(desired), 0)::int FROM (SELECT DISTINCT ON (version) desired FROM scale_events
            WHERE deployment_id = $1 AND at < $2 ORDER BY version, at DESC) last) AS desired,
         (SELECT count(*)::int FROM containers c JOIN deployment_versions v ON v.id = c.deployment_version_id
            WHERE v.deployment_id = $1 AND c.ready_at < $2 AND (c.stopped_at IS NULL OR c.stopped_at >= $2)) AS ready`,
      [deploymentId, from.toISOString()],
    );
    return { steps, desiredAtStart: start.desired, readyAtStart: start.ready };
  }

  /** Adds a gateway's counts to the minutes' rows (created when new): replicas' counts sum. */
  async addRequestMinutes(rows: RequestMinute[]): Promise<void> {
    if (!rows.length) return;
    await this.db.query(
      `INSERT INTO endpoint_request_minutes (deployment_id, version, minute, requests, errors, buckets)
       SELECT * FROM jsonb_to_recordset($1::jsonb) AS r(deployment_id uuid, version int, minute timestamptz, requests int, errors int, buckets int[])
       ON CONFLICT (deployment_id, version, minute) DO UPDATE SET
         requests = endpoint_request_minutes.requests + excluded.requests,
         errors = endpoint_request_minutes.errors + excluded.errors,
         buckets = ARRAY(SELECT a + b FROM unnest(endpoint_request_minutes.buckets, excluded.buckets) AS pair(a, b))`,
      [
        JSON.stringify(
          rows.map((r) => ({
            deployment_id: r.deploymentId,
            version: r.version,
            minute: r.minute.toISOString(),
            requests: r.requests,
            errors: r.errors,
            buckets: r.buckets,
          })),
        ),
      ],
    );
  }

  /** The deployment's request minutes since `from`, every version summed per minute, oldest first. */
  requestMinutes(deploymentId: string, from: Date): Promise<Omit<RequestMinute, 'deploymentId' | 'version'>[]> {
    return queryRowsOn(
      this.db,
      `SELECT minute, sum(requests)::int AS requests, sum(errors)::int AS errors,
              ARRAY(SELECT sum(b)::int FROM endpoint_request_minutes e2, unnest(e2.buckets) WITH ORDINALITY AS u(b, i)
                    WHERE e2.deployment_id = $1 AND e2.minute = e.minute GROUP BY i ORDER BY i) AS buckets
       FROM endpoint_request_minutes e WHERE deployment_id = $1 AND minute >= $2 GROUP BY minute ORDER BY minute`,
      [deploymentId, from.toISOString()],
    );
  }

  /** The deployment's containers not yet stopped or failed, oldest first. */
  containersOf(deploymentId: string): Promise<DeploymentContainer[]> {
    return queryRowsOn<DeploymentContainer>(
      this.db,
      `SELECT c.id, v.version, c.machine_id AS "machineId", c.state, c.state_reason AS "stateReason", c.ready_at AS "readyAt" FROM containers c
       JOIN deployment_versions v ON v.id = c.deployment_version_id
       WHERE v.deployment_id = $1 AND c.state NOT IN ('stopped', 'failed') ORDER BY c.created_at`,
      [deploymentId],
    );
  }

  /**
   * The deployment's containers in any state but long finished (ended within 5 minutes), with
   * the machine each is placed on (null before placement), for following its logs.
   */
  recentContainerPlacements(deploymentId: string): Promise<{ id: string; machineId: string | null }[]> {
    return queryRowsOn<{ id: string; machineId: string | null }>(
      this.db,
      `SELECT c.id, c.machine_id AS "machineId" FROM containers c JOIN deployment_versions v ON v.id = c.deployment_version_id
       WHERE v.deployment_id = $1 AND (c.state NOT IN ('stopped', 'failed') OR c.updated_at > now() - interval '5 minutes')`,
      [deploymentId],
    );
  }
}
