import { BadRequestException, Inject, Injectable, NotFoundException, ServiceUnavailableException } from '@nestjs/common';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import {
  type DeploymentSpec,
  pullsTasks,
  type RequestHistory,
  type ResolvedSpec,
  resolveSpec,
  type ScaleHistory,
  SpecError,
} from '#tern/contracts';
import {
  ACTIVE_CONTAINER_STATES,
  CodeBundlesRepository,
  type Deployment,
  DeploymentsRepository,
  type DeploymentWithCounts,
  MachinesRepository,
  SecretsRepository,
  VolumesRepository,
} from '#tern/persistence';
import { needsVerifiedMachine } from '#tern/placement';
import type { Principal } from '../auth/principal.js';
import { ImagePins } from '../images/image-pins.service.js';
import { TasksService } from '../tasks/tasks.service.js';
import { crashLoopView } from './crash-loop-view.js';
import { DeploymentRecords } from './deployment-records.js';
import { type DeploymentDetail, type DeploymentSummary, type DeployResult, deploymentUrl } from './deployment-views.js';
import { gpuOfferProblem } from './gpu-offer.js';
import { resolvedOf, storedSpec, submittedOf } from './stored-spec.js';
import { requestHistory } from './request-history.js';
import { scaleHistory } from './scale-history.js';

@Injectable()
export class DeploymentsService {
  constructor(
    private readonly deployments: DeploymentsRepository,
    private readonly machines: MachinesRepository,
    private readonly records: DeploymentRecords,
    private readonly tasks: TasksService,
    private readonly codeBundles: CodeBundlesRepository,
    private readonly imagePins: ImagePins,
    private readonly volumes: VolumesRepository,
    private readonly secrets: SecretsRepository,
    @Inject(TERN_CONFIG) private readonly config: TernConfig,
  ) {}

  async deploy(principal: Principal, spec: DeploymentSpec, baseUrl: string): Promise<DeployResult> {
    const resolved = await this.check(principal, spec);
    // Digests are not secrets: naming another workspace's bundle must not run its code.
    if (spec.code && !(await this.codeBundles.isOwnedBy(principal.workspaceId, spec.code))) {
      throw new NotFoundException(
        `code ${spec.code} not found in workspace "${principal.workspaceName}": upload it first (PUT /api/v1/code/<digest>; tern deploy does)`,
      );
    }
    await this.requireVolumes(principal, resolved);
    await this.requireSecrets(principal, resolved);
    const { deployment, version } = await this.deployments.addVersion(
      principal.workspaceId,
      spec.name,
      spec.kind,
      storedSpec(resolved, spec) as unknown as Record<string, unknown>,
    );
    await this.publish(deployment.id, `deployed ${spec.name} v${version}`);
    return { name: spec.name, version, deploymentId: deployment.id, url: deploymentUrl(baseUrl, spec.name, spec.kind), spec: resolved };
  }

  async list(principal: Principal, baseUrl: string): Promise<DeploymentSummary[]> {
    const rows = await this.deployments.listWithCounts(principal.workspaceId);
    return rows.map((r) => summary(r, baseUrl));
  }

  async get(principal: Principal, name: string, baseUrl: string): Promise<DeploymentDetail> {
    const row = await this.deployments.findWithCounts(principal.workspaceId, name);
    if (!row) throw notFound(principal, name);
    const versions = await this.deployments.versionsOf(row.id, 'DESC');
    const containers = await this.deployments.containersOf(row.id);
    const actualByVersion = new Map<number, number>();
    for (const c of containers) {
      if ((ACTIVE_CONTAINER_STATES as readonly string[]).includes(c.state))
        actualByVersion.set(c.version, (actualByVersion.get(c.version) ?? 0) + 1);
    }
    const latest = versions.find((v) => v.version === row.latestVersion)!;
    return {
      ...summary(row, baseUrl),
      deploymentId: row.id,
      spec: resolvedOf(latest),
      submitted: submittedOf(latest),
      versions: versions.map((v) => ({
        version: v.version,
        latest: v.version === row.latestVersion,
        desired: v.desiredContainers,
        actual: actualByVersion.get(v.version) ?? 0,
        desiredReason: v.desiredReason,
        placementReason: v.placementReason,
        crashLoop: crashLoopView(v, this.config.containers.crashBackoff),
        createdAt: v.createdAt.toISOString(),
      })),
      containers: containers.map((c) => ({
        id: c.id,
        version: c.version,
        machineId: c.machineId,
        state: c.state,
        reason: c.stateReason,
        readyAt: c.readyAt ? new Date(c.readyAt).toISOString() : null,
      })),
    };
  }

  /** stop: records say stopped (no containers, requests 503); start: active again; delete: records removed, rows kept. */
  async scaleHistory(principal: Principal, name: string, minutes: number): Promise<ScaleHistory> {
    const d = await this.require(principal, name);
    const to = new Date();
    const from = new Date(to.getTime() - minutes * 60_000);
    return scaleHistory(name, { from, to }, await this.deployments.scaleHistory(d.id, from));
  }

  async requestHistory(principal: Principal, name: string, minutes: number): Promise<RequestHistory> {
    const d = await this.require(principal, name);
    const to = new Date(Math.ceil(Date.now() / 60_000) * 60_000);
    const from = new Date(to.getTime() - minutes * 60_000);
    return requestHistory(name, { from, to }, await this.deployments.requestMinutes(d.id, from));
  }

  async setState(principal: Principal, name: string, action: 'stop' | 'start' | 'delete'): Promise<Deployment> {
    const found = await this.deployments.findByName(principal.workspaceId, name);
    if (!found || found.state === 'deleted') throw notFound(principal, name);
    const next = { stop: 'stopped', start: 'ready', delete: 'deleted' } as const;
    const d = await this.deployments.setState(
      found,
      next[action],
      action === 'start'
        ? null
        : `${action === 'stop' ? 'stopped' : 'deleted'} by token ${principal.tokenId} at ${new Date().toISOString()}`,
    );
    await this.publish(d.id, `${action} ${name}`);
    if (action === 'delete' && pullsTasks(d.kind)) await this.tasks.dropQueue(d.id, d.latestVersion);
    return d;
  }

  /** A deployment's containers (any state but long finished) and their machines, for following its logs. */
  containerPlacements(deploymentId: string): Promise<{ id: string; machineId: string | null }[]> {
    return this.deployments.recentContainerPlacements(deploymentId);
  }

  async require(principal: Principal, name: string): Promise<Deployment> {
    const d = await this.deployments.findByName(principal.workspaceId, name);
    if (!d || d.state === 'deleted') throw notFound(principal, name);
    return d;
  }

  /** The spec's own rules, then whether the cluster could ever run it. Both answer 400 naming the field. */
  private async check(principal: Principal, spec: DeploymentSpec): Promise<ResolvedSpec> {
    let resolved: ResolvedSpec;
    try {
      resolved = resolveSpec(spec);
    } catch (e) {
      if (e instanceof SpecError) throw new BadRequestException([e.message]);
      throw e;
    }
    const [pools, machines] = await Promise.all([this.machines.listPools(), resolved.gpuCount > 0 ? this.machines.gpuOffers() : []]);
    const problem = gpuOfferProblem(
      resolved,
      spec.pool !== undefined,
      pools,
      machines.map((m) => ({ pool: m.pool, gpuModels: (m.gpus ?? []).map((g) => g.model) })),
    );
    if (problem) throw new BadRequestException([problem.message]);
    const credentials = spec.registry_secret ? { workspaceId: principal.workspaceId, secret: spec.registry_secret } : undefined;
    const image = await this.imagePins.pin(resolved.image, principal.workspaceId, credentials);
    const verifiedOnly = needsVerifiedMachine({
      verified: spec.placement?.verified,
      volumes: resolved.volumes.length,
      usesSecrets: !!credentials,
      privateImage: this.imagePins.isPrivate(image),
    });
    return { ...resolved, image, verifiedOnly };
  }

  /** Every volume the spec mounts must be one of the workspace's: a container would otherwise fail at every start. */
  private async requireVolumes(principal: Principal, resolved: ResolvedSpec): Promise<void> {
    for (const [i, v] of resolved.volumes.entries()) {
      if (!(await this.volumes.find(principal.workspaceId, v.name)))
        throw new BadRequestException([
          `volumes[${i}].name: volume ${v.name} not found in workspace "${principal.workspaceName}": create it first (tern volume create ${v.name})`,
        ]);
    }
  }

  /** Every secret the spec sets must be one of the workspace's: a container would otherwise fail at every start. */
  private async requireSecrets(principal: Principal, resolved: ResolvedSpec): Promise<void> {
    const names = resolved.secrets ?? [];
    if (!names.length) return;
    const have = new Set(await this.secrets.existing(principal.workspaceId, names));
    const missing = names.filter((n) => !have.has(n));
    if (missing.length)
      throw new BadRequestException([
        `secrets: ${missing.join(', ')} not found in workspace "${principal.workspaceName}": set each first (tern secret set ${missing[0]})`,
      ]);
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

function summary(r: DeploymentWithCounts, baseUrl: string): DeploymentSummary {
  return {
    name: r.name,
    kind: r.kind,
    version: r.latestVersion,
    state: r.state,
    desired: r.desired,
    actual: r.actual,
    reason: r.placementReason ?? r.stateReason,
    url: deploymentUrl(baseUrl, r.name, r.kind),
    updatedAt: new Date(r.updatedAt).toISOString(),
  };
}

function notFound(principal: Principal, name: string): NotFoundException {
  return new NotFoundException(`deployment "${name}" not found in workspace "${principal.workspaceName}"`);
}
