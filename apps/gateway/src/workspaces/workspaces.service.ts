import { BadRequestException, ConflictException, ForbiddenException, Injectable, NotFoundException } from '@nestjs/common';
import { type ApiToken, type ApiTokenRole, isUniqueViolation, TokensRepository, type Workspace } from '#tern/persistence';
import { AuthService } from '../auth/auth.service.js';
import { type Principal } from '../auth/principal.js';

export interface TokenView {
  id: string;
  name: string;
  prefix: string;
  role: ApiTokenRole;
  createdAt: Date;
  lastUsedAt: Date | null;
  expiresAt: Date | null;
}

function view(t: ApiToken): TokenView {
  return {
    id: t.id,
    name: t.name,
    prefix: t.prefix,
    role: t.role,
    createdAt: t.createdAt,
    lastUsedAt: t.lastUsedAt,
    expiresAt: t.expiresAt,
  };
}

/** A requested expiry as a moment in the future, or a 400 saying what to send. */
function expiryOf(expiresAt: string | undefined, now = new Date()): Date | null {
  if (expiresAt === undefined) return null;
  const at = new Date(expiresAt);
  if (Number.isNaN(at.getTime())) throw new BadRequestException(`expiresAt "${expiresAt}" is not a date-time`);
  if (at <= now) throw new BadRequestException(`expiresAt ${at.toISOString()} is not in the future`);
  return at;
}

@Injectable()
export class WorkspacesService {
  constructor(
    private readonly tokens: TokensRepository,
    private readonly auth: AuthService,
  ) {}

  async get(id: string) {
    const w = await this.tokens.findWorkspace(id);
    if (!w) throw new NotFoundException(`workspace ${id} not found`);
    return w;
  }

  list() {
    return this.tokens.listWorkspaces();
  }

  /** A new workspace with its first admin token (shown once). */
  async create(name: string) {
    let workspace: Workspace;
    try {
      workspace = await this.tokens.createWorkspace(name);
    } catch (e) {
      if (isUniqueViolation(e)) {
        const taken = await this.tokens.findWorkspaceByName(name);
        if (taken?.deletedAt)
          throw new ConflictException(
            `workspace "${name}" was deleted at ${taken.deletedAt.toISOString()}; its name is not given again (its usage is kept under it): choose another`,
          );
        throw new ConflictException(`workspace "${name}" already exists`);
      }
      throw e;
    }
    const { token, row } = await this.auth.issue(workspace.id, 'admin', 'admin');
    return { workspace, token, tokenId: row.id };
  }

  async listTokens(workspaceId: string): Promise<TokenView[]> {
    const rows = await this.tokens.listActive(workspaceId);
    return rows.map(view);
  }

  /** A workspace admin gives admin or member tokens of its own workspace; only an operator makes an operator. */
  async createToken(caller: Principal, name: string, role: ApiTokenRole, expiresAt?: string) {
    const expiry = expiryOf(expiresAt);
    if (role === 'operator' && caller.role !== 'operator') {
      throw new ForbiddenException('this action needs an operator token: a workspace admin creates admin or member tokens only');
    }
    const { token, row } = await this.auth.issue(caller.workspaceId, name, role, expiry);
    return { ...view(row), token };
  }

  /** An operator token lives in a workspace (the bootstrap one in `default`) but only an operator revokes it. */
  async revokeToken(caller: Principal, id: string) {
    const row = await this.tokens.findInWorkspace(id, caller.workspaceId);
    if (!row || row.revokedAt) throw new NotFoundException(`token ${id} not found in this workspace`);
    if (row.role === 'operator' && caller.role !== 'operator') {
      throw new ForbiddenException('this action needs an operator token: only an operator revokes an operator token');
    }
    await this.tokens.revoke(row.id);
    this.auth.forget(row.id);
  }
}
