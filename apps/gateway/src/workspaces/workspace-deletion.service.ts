import { ConflictException, Injectable, Logger, NotFoundException } from '@nestjs/common';
import type { WorkspaceDeleted } from '#tern/contracts';
import {
  DeploymentsRepository,
  SandboxesRepository,
  SecretsRepository,
  TokensRepository,
  VolumesRepository,
  type Workspace,
} from '#tern/persistence';
import { AuthService, DEFAULT_WORKSPACE } from '../auth/auth.service.js';
import type { Principal } from '../auth/principal.js';
import { DeploymentsService } from '../deployments/deployments.service.js';
import { RegistryImages } from '../images/registry-images.js';
import { NatsUsersService } from '../nats-users/nats-users.service.js';
import { workspaceBuilds } from '../registry-tokens/registry-rights.js';
import { SandboxesService } from '../sandboxes/sandboxes.service.js';
import { VolumesService } from '../volumes/volumes.service.js';

/** More live sandboxes than any workspace runs: each is terminated. */
const SANDBOXES_AT_MOST = 100_000;

/** How long a gateway purging a workspace holds it before another may take it over (a gateway that died midway). */
export const PURGE_CLAIM_MS = 10 * 60_000;
/** When a purge that left something (NATS or the registry unreachable) is tried again. */
export const PURGE_RETRY_MS = 60_000;

/**
 * Deleting a workspace (operator). The row is marked first, so a second delete is 404 and no
 * token of it is believed again, then what it holds goes (its purge), step by step, each the way
 * its own delete route does it. Usage intervals and metered rows are kept: they are what was
 * billed. A step that fails on one object is logged and named in the answer's `problems`; the
 * others still run. Each step takes only what is left, so a purge runs again safely: one that
 * left something, or whose gateway died midway, is resumed by the WorkspacePurgeSweeper once its
 * claim has lapsed.
 */
@Injectable()
export class WorkspaceDeletion {
  private readonly logger = new Logger('workspace-deletion');

  constructor(
    private readonly tokens: TokensRepository,
    private readonly auth: AuthService,
    private readonly natsUsers: NatsUsersService,
    private readonly deploymentRows: DeploymentsRepository,
    private readonly deployments: DeploymentsService,
    private readonly sandboxRows: SandboxesRepository,
    private readonly sandboxes: SandboxesService,
    private readonly secrets: SecretsRepository,
    private readonly volumeRows: VolumesRepository,
    private readonly volumes: VolumesService,
    private readonly registry: RegistryImages,
  ) {}

  async delete(caller: Principal, id: string): Promise<WorkspaceDeleted> {
    const workspace = await this.deletable(caller, id);
    if (!(await this.tokens.markWorkspaceDeleted(workspace.id, caller.tokenId, PURGE_CLAIM_MS))) throw notFound(id);
    return this.purge(workspace, caller.tokenId);
  }

  /**
   * Purges the deleted workspace that waits longest for it (its delete died midway or left
   * something), claimed so that no other gateway purges it at the same time; undefined when none
   * waits.
   */
  async resume(): Promise<WorkspaceDeleted | undefined> {
    const workspace = await this.tokens.claimUnpurgedWorkspace(PURGE_CLAIM_MS);
    if (!workspace) return undefined;
    this.logger.log({ workspaceId: workspace.id }, `resuming the delete of workspace ${workspace.name}`);
    return this.purge(workspace, workspace.deletedBy ?? 'unknown');
  }

  /** Takes what the deleted (and claimed) workspace holds, acting as its operator under the deleting token's id. */
  private async purge(workspace: Workspace, tokenId: string): Promise<WorkspaceDeleted> {
    const acting: Principal = { workspaceId: workspace.id, workspaceName: workspace.name, tokenId, role: 'operator' };
    const problems: string[] = [];
    const attempt = async <T>(what: string, step: () => Promise<T>, otherwise: T): Promise<T> => {
      try {
        return await step();
      } catch (e) {
        const message = `${what}: ${(e as Error).message}`;
        this.logger.warn({ workspaceId: workspace.id }, `deleting workspace ${workspace.name}: ${message}`);
        problems.push(message);
        return otherwise;
      }
    };
    const revokedTokens = await this.revokeTokens(workspace.id);
    const revokedNatsUsers = await attempt('NATS users', () => this.natsUsers.revokeAllOf(workspace.id), 0);
    let deletedDeployments = 0;
    for (const d of await this.deploymentRows.listWithCounts(workspace.id))
      deletedDeployments += await attempt(
        `deployment ${d.name}`,
        async () => (await this.deployments.setState(acting, d.name, 'delete'), 1),
        0,
      );
    let terminatedSandboxes = 0;
    for (const s of await this.sandboxRows.listOfWorkspace(workspace.id, true, SANDBOXES_AT_MOST))
      terminatedSandboxes += await attempt(`sandbox ${s.id}`, async () => (await this.sandboxes.terminate(acting, s.id), 1), 0);
    const destroyedSecrets = await this.secrets.removeAll(workspace.id);
    let deletedVolumes = 0;
    for (const v of await this.volumeRows.list(workspace.id))
      deletedVolumes += await attempt(`volume ${v.name}`, async () => (await this.volumes.delete(workspace.id, v.name), 1), 0);
    const deletedImages = this.registry.enabled
      ? await attempt('registry images', () => this.registry.deleteRepositoriesUnder(workspaceBuilds(workspace.id)), 0)
      : 0;
    await this.tokens.endWorkspacePurge(workspace.id, problems.length === 0, PURGE_RETRY_MS);
    const deleted = {
      id: workspace.id,
      name: workspace.name,
      revokedTokens,
      revokedNatsUsers,
      deletedDeployments,
      terminatedSandboxes,
      destroyedSecrets,
      deletedVolumes,
      deletedImages,
      problems,
    };
    this.logger.log({ ...deleted, by: tokenId }, `workspace ${workspace.name} deleted`);
    return deleted;
  }

  /** The workspace, unless it is one no operator may delete; 404 when unknown or deleted already. */
  private async deletable(caller: Principal, id: string): Promise<Workspace> {
    const workspace = await this.tokens.findWorkspace(id);
    if (!workspace) throw notFound(id);
    if (workspace.name === DEFAULT_WORKSPACE)
      throw new ConflictException(
        `workspace "${DEFAULT_WORKSPACE}" holds the bootstrap operator token (BOOTSTRAP_ADMIN_TOKEN) and is made again at every start: it cannot be deleted`,
      );
    if (workspace.id === caller.workspaceId)
      throw new ConflictException(
        `workspace "${workspace.name}" is the calling token's own: delete it with an operator token of another workspace`,
      );
    const operators = await this.tokens.activeOperatorTokens(workspace.id);
    if (operators.length)
      throw new ConflictException(
        `workspace "${workspace.name}" holds operator token(s) ${operators.map((t) => `${t.name} (${t.id})`).join(', ')}: revoke them first, so that deleting a workspace never takes an operator's access with it`,
      );
    return workspace;
  }

  /** Every token of the workspace, revoked; forgotten at once by this replica (others within their 10 s cache). */
  private async revokeTokens(workspaceId: string): Promise<number> {
    const ids = await this.tokens.revokeAllOf(workspaceId);
    for (const tokenId of ids) this.auth.forget(tokenId);
    return ids.length;
  }
}

const notFound = (id: string) => new NotFoundException(`workspace ${id} not found`);
