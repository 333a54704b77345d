import { Injectable } from '@nestjs/common';
import { DataSource, IsNull } from 'typeorm';
import { ApiToken } from '../entities/api-token.entity.js';
import { Workspace } from '../entities/workspace.entity.js';

/** An API token to store: only the hash of its secret, and the secret's first characters to tell it apart. */
export type NewApiToken = Pick<ApiToken, 'workspaceId' | 'name' | 'role' | 'tokenHash' | 'prefix'> & { expiresAt?: Date | null };

/** Every statement on workspaces and their API tokens. */
@Injectable()
export class TokensRepository {
  constructor(private readonly db: DataSource) {}

  /** The unrevoked token with this hash (expired or not: the caller says which), its workspace loaded; null when none. */
  findActiveByHash(tokenHash: string): Promise<ApiToken | null> {
    return this.db.getRepository(ApiToken).findOne({ where: { tokenHash, revokedAt: IsNull() }, relations: { workspace: true } });
  }

  async markUsed(tokenId: string): Promise<void> {
    await this.db.getRepository(ApiToken).update(tokenId, { lastUsedAt: new Date() });
  }

  issue(token: NewApiToken): Promise<ApiToken> {
    const tokens = this.db.getRepository(ApiToken);
    return tokens.save(tokens.create(token));
  }

  /**
   * Makes sure the workspace exists and accepts the token; true when the token was new.
   * Idempotent and safe with several gateways starting at once (inserts that keep what is there).
   */
  async ensureWorkspaceToken(workspaceName: string, token: Omit<NewApiToken, 'workspaceId'>): Promise<boolean> {
    return this.db.transaction(async (m) => {
      await m.createQueryBuilder().insert().into(Workspace).values({ name: workspaceName }).orIgnore().execute();
      const workspace = await m.findOneByOrFail(Workspace, { name: workspaceName });
      const inserted = await m
        .createQueryBuilder()
        .insert()
        .into(ApiToken)
        .values({ ...token, workspaceId: workspace.id })
        .orIgnore()
        .execute();
      return inserted.identifiers.filter(Boolean).length > 0;
    });
  }

  /** The workspace's tokens not revoked, oldest first. */
  listActive(workspaceId: string): Promise<ApiToken[]> {
    return this.db.getRepository(ApiToken).find({ where: { workspaceId, revokedAt: IsNull() }, order: { createdAt: 'ASC' } });
  }

  /** A token of the workspace, revoked or not; null when it is another workspace's or unknown. */
  findInWorkspace(tokenId: string, workspaceId: string): Promise<ApiToken | null> {
    return this.db.getRepository(ApiToken).findOneBy({ id: tokenId, workspaceId });
  }

  async revoke(tokenId: string): Promise<void> {
    await this.db.getRepository(ApiToken).update(tokenId, { revokedAt: new Date() });
  }

  findWorkspace(id: string): Promise<Workspace | null> {
    return this.db.getRepository(Workspace).findOneBy({ id });
  }

  /** Every workspace, oldest first. */
  listWorkspaces(): Promise<Workspace[]> {
    return this.db.getRepository(Workspace).find({ order: { createdAt: 'ASC' } });
  }

  /** Rejects a taken name with the unique violation uq_workspaces_name. */
  createWorkspace(name: string): Promise<Workspace> {
    const workspaces = this.db.getRepository(Workspace);
    return workspaces.save(workspaces.create({ name }));
  }
}
