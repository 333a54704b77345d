import { BadRequestException, Injectable, NotFoundException, ServiceUnavailableException } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { type DeploymentSpec, type ResolvedSpec, resolveSpec, SpecError } from '#tern/contracts';
import { Deployment, DeploymentVersion, Machine, Pool } from '#tern/persistence';
import type { Principal } from '../auth/principal.js';
import { TasksService } from '../tasks/tasks.service.js';
import { DeploymentRecords } from './deployment-records.js';
import { ACTIVE_CONTAINER_STATES, type DeploymentDetail, type DeploymentSummary, type DeployResult, deploymentUrl } from './deployment-views.js';
import { gpuOfferProblem } from './gpu-offer.js';
import { resolvedOf, storedSpec, submittedOf } from './stored-spec.js';

interface SummaryRow {
  id: string;
  name: string;
  kind: DeploymentSummary['kind'];
  state: DeploymentSummary['state'];
  state_reason: string | null;
  latest_version: number;
  updated_at: Date;
  placement_reason: string | null;
  desired: number;
  actual: number;
}

const ACTIVE = ACTIVE_CONTAINER_STATES.map((s) => `'${s}'`).join(', ');

/** One row per deployment of a workspace (deleted ones left out), desired and actual summed over its versions. */
const SUMMARY_SQL = `
  SELECT d.id, d.name, d.kind, d.state, d.state_reason, d.latest_version, d.updated_at, lv.placement_reason,
    (SELECT coalesce(sum(v.desired_containers), 0)::int FROM deployment_versions v WHERE v.deployment_id = d.id) AS desired,
    (SELECT count(*)::int FROM containers c JOIN deployment_versions v ON v.id = c.deployment_version_id
      WHERE v.deployment_id = d.id AND c.state IN (${ACTIVE})) AS actual
  FROM deployments d
  LEFT JOIN deployment_versions lv ON lv.deployment_id = d.id AND lv.version = d.latest_version
  WHERE d.workspace_id = $1 AND d.state <> 'deleted'`;

@Injectable()
export class DeploymentsService {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly records: DeploymentRecords,
    private readonly tasks: TasksService,
  ) {}

  async deploy(principal: Principal, spec: DeploymentSpec, baseUrl: string): Promise<DeployResult> {
    const resolved = await this.check(spec);
    const { deployment, version } = await this.db.transaction(async (m) => {
      // Insert-or-keep, then lock the row: concurrent deploys of one name get consecutive versions.
      await m.query(
        `INSERT INTO deployments (workspace_id, name, kind, state) VALUES ($1, $2, $3, 'pending') ON CONFLICT (workspace_id, name) DO NOTHING`,
        [principal.workspaceId, spec.name, spec.kind],
      );
      const d = await m.getRepository(Deployment).findOneOrFail({
        where: { workspaceId: principal.workspaceId, name: spec.name },
        lock: { mode: 'pessimistic_write' },
      });
      const version = d.latestVersion + 1;
      await m.getRepository(DeploymentVersion).save(
        m.getRepository(DeploymentVersion).create({ deploymentId: d.id, version, spec: storedSpec(resolved, spec) as unknown as Record<string, unknown> }),
      );
      Object.assign(d, { latestVersion: version, kind: spec.kind, state: 'ready', stateReason: null });
      await m.getRepository(Deployment).save(d);
      return { deployment: d, version };
    });
    await this.publish(deployment.id, `deployed ${spec.name} v${version}`);
    return { name: spec.name, version, deploymentId: deployment.id, url: deploymentUrl(baseUrl, spec.name, spec.kind), spec: resolved };
  }

  async list(principal: Principal, baseUrl: string): Promise<DeploymentSummary[]> {
    const rows: SummaryRow[] = await this.db.query(`${SUMMARY_SQL} ORDER BY d.name`, [principal.workspaceId]);
    return rows.map((r) => summary(r, baseUrl));
  }

  async get(principal: Principal, name: string, baseUrl: string): Promise<DeploymentDetail> {
    const rows: SummaryRow[] = await this.db.query(`${SUMMARY_SQL} AND d.name = $2`, [principal.workspaceId, name]);
    if (!rows.length) throw notFound(principal, name);
    const row = rows[0];
    const versions = await this.db.getRepository(DeploymentVersion).find({ where: { deploymentId: row.id }, order: { version: 'DESC' } });
    const containers: { id: string; version: number; machine_id: string | null; state: string; state_reason: string | null; ready_at: Date | null }[] =
      await this.db.query(
        `SELECT c.id, v.version, c.machine_id, c.state, c.state_reason, c.ready_at FROM containers c
         JOIN deployment_versions v ON v.id = c.deployment_version_id
         WHERE v.deployment_id = $1 AND c.state NOT IN ('stopped', 'failed') ORDER BY c.created_at`,
        [row.id],
      );
    const actualByVersion = new Map<number, number>();
    for (const c of containers) {
      if ((ACTIVE_CONTAINER_STATES as readonly string[]).includes(c.state)) actualByVersion.set(c.version, (actualByVersion.get(c.version) ?? 0) + 1);
    }
    const latest = versions.find((v) => v.version === row.latest_version)!;
    return {
      ...summary(row, baseUrl),
      deploymentId: row.id,
      spec: resolvedOf(latest),
      submitted: submittedOf(latest),
      versions: versions.map((v) => ({
        version: v.version,
        latest: v.version === row.latest_version,
        desired: v.desiredContainers,
        actual: actualByVersion.get(v.version) ?? 0,
        desiredReason: v.desiredReason,
        placementReason: v.placementReason,
        createdAt: v.createdAt.toISOString(),
      })),
      containers: containers.map((c) => ({
        id: c.id,
        version: c.version,
        machineId: c.machine_id,
        state: c.state,
        reason: c.state_reason,
        readyAt: c.ready_at ? new Date(c.ready_at).toISOString() : null,
      })),
    };
  }

  /** stop: records say stopped (no containers, requests 503); start: active again; delete: records removed, rows kept. */
  async setState(principal: Principal, name: string, action: 'stop' | 'start' | 'delete'): Promise<Deployment> {
    const repo = this.db.getRepository(Deployment);
    const d = await repo.findOneBy({ workspaceId: principal.workspaceId, name });
    if (!d || d.state === 'deleted') throw notFound(principal, name);
    const next = { stop: 'stopped', start: 'ready', delete: 'deleted' } as const;
    d.state = next[action];
    d.stateReason = action === 'start' ? null : `${action === 'stop' ? 'stopped' : 'deleted'} by token ${principal.tokenId} at ${new Date().toISOString()}`;
    await repo.save(d);
    await this.publish(d.id, `${action} ${name}`);
    if (action === 'delete' && d.kind === 'task_queue') await this.tasks.dropQueue(d.id, d.latestVersion);
    return d;
  }

  /** Container ids of a deployment (any state but long finished), for following its logs. */
  async containerIds(deploymentId: string): Promise<string[]> {
    const rows: { id: string }[] = await this.db.query(
      `SELECT c.id FROM containers c JOIN deployment_versions v ON v.id = c.deployment_version_id
       WHERE v.deployment_id = $1 AND (c.state NOT IN ('stopped', 'failed') OR c.updated_at > now() - interval '5 minutes')`,
      [deploymentId],
    );
    return rows.map((r) => r.id);
  }

  async require(principal: Principal, name: string): Promise<Deployment> {
    const d = await this.db.getRepository(Deployment).findOneBy({ workspaceId: principal.workspaceId, name });
    if (!d || d.state === 'deleted') throw notFound(principal, name);
    return d;
  }

  /** The spec's own rules, then whether the cluster could ever run it. Both answer 400 naming the field. */
  private async check(spec: DeploymentSpec): Promise<ResolvedSpec> {
    let resolved: ResolvedSpec;
    try {
      resolved = resolveSpec(spec);
    } catch (e) {
      if (e instanceof SpecError) throw new BadRequestException([e.message]);
      throw e;
    }
    const [pools, machines] = await Promise.all([
      this.db.getRepository(Pool).find({ select: { name: true, allowedGpuTypes: true } }),
      resolved.gpuCount > 0 ? this.db.getRepository(Machine).find({ select: { pool: true, gpus: true } }) : [],
    ]);
    const problem = gpuOfferProblem(
      resolved,
      spec.pool !== undefined,
      pools,
      machines.map((m) => ({ pool: m.pool, gpuModels: (m.gpus ?? []).map((g) => g.model) })),
    );
    if (problem) throw new BadRequestException([problem.message]);
    return resolved;
  }

  private async publish(deploymentId: string, what: string): Promise<void> {
    try {
      await this.records.write(deploymentId);
    } catch (e) {
      throw new ServiceUnavailableException(
        `${what} is saved, but NATS did not take the deployment record (${(e as Error).message}); it is published again on the next change or gateway start`,
      );
    }
  }
}

function summary(r: SummaryRow, baseUrl: string): DeploymentSummary {
  return {
    name: r.name,
    kind: r.kind,
    version: r.latest_version,
    state: r.state,
    desired: r.desired,
    actual: r.actual,
    reason: r.placement_reason ?? r.state_reason,
    url: deploymentUrl(baseUrl, r.name, r.kind),
    updatedAt: new Date(r.updated_at).toISOString(),
  };
}

function notFound(principal: Principal, name: string): NotFoundException {
  return new NotFoundException(`deployment "${name}" not found in workspace "${principal.workspaceName}"`);
}
