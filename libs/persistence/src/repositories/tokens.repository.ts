import { Injectable } from '@nestjs/common';
import { DataSource, IsNull } from 'typeorm';
import { ApiToken } from '../entities/api-token.entity.js';
import { Workspace } from '../entities/workspace.entity.js';
import { queryRowsOn } from '../query-rows.js';

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

  /** The unrevoked token with this id (expired or not: the caller says which), its workspace loaded; null when none. */
  findActiveById(id: string): Promise<ApiToken | null> {
    return this.db.getRepository(ApiToken).findOne({ where: { id, revokedAt: IsNull() }, relations: { workspace: true } });
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

  /** A workspace not deleted; null when unknown or deleted. */
  findWorkspace(id: string): Promise<Workspace | null> {
    return this.db.getRepository(Workspace).findOneBy({ id, deletedAt: IsNull() });
  }

  /** A workspace by name, deleted or not (a deleted one's name stays taken). */
  findWorkspaceByName(name: string): Promise<Workspace | null> {
    return this.db.getRepository(Workspace).findOneBy({ name });
  }

  /** Every workspace not deleted, oldest first. */
  listWorkspaces(): Promise<Workspace[]> {
    return this.db.getRepository(Workspace).find({ where: { deletedAt: IsNull() }, order: { createdAt: 'ASC' } });
  }

  /**
   * Marks the workspace deleted by `tokenId` and claims its purge for `claimMs`; true for the one
   * caller that did (a second, concurrent delete gets false).
   */
  async markWorkspaceDeleted(id: string, tokenId: string, claimMs: number): Promise<boolean> {
    const rows = await queryRowsOn<{ id: string }>(
      this.db,
      `UPDATE workspaces SET deleted_at = now(), deleted_by = $2, purge_claimed_until = now() + $3 * interval '1 millisecond'
       WHERE id = $1 AND deleted_at IS NULL RETURNING id`,
      [id, tokenId, claimMs],
    );
    return rows.length > 0;
  }

  /**
   * The deleted workspace longest waiting for its purge, claimed for `claimMs` (none claimed by
   * another gateway meanwhile; SKIP LOCKED, so of several gateways one claims it); undefined
   * when none waits.
   */
  async claimUnpurgedWorkspace(claimMs: number): Promise<Workspace | undefined> {
    const rows = await queryRowsOn<Workspace>(
      this.db,
      `UPDATE workspaces SET purge_claimed_until = now() + $1 * interval '1 millisecond'
       WHERE id = (SELECT id FROM workspaces
                   WHERE deleted_at IS NOT NULL AND purged_at IS NULL AND (purge_claimed_until IS NULL OR purge_claimed_until <= now())
                   ORDER BY deleted_at LIMIT 1 FOR UPDATE SKIP LOCKED)
       RETURNING id, name, created_at AS "createdAt", deleted_at AS "deletedAt", deleted_by AS "deletedBy", purged_at AS "purgedAt"`,
      [claimMs],
    );
    return rows[0];
  }

  /** Ends a claimed purge: the workspace purged, or (something left) its claim moved to `retryMs` from now. */
  async endWorkspacePurge(id: string, purged: boolean, retryMs: number): Promise<void> {
    await queryRowsOn(
      this.db,
      purged
        ? `UPDATE workspaces SET purged_at = now(), purge_claimed_until = NULL WHERE id = $1`
        : `UPDATE workspaces SET purge_claimed_until = now() + $2 * interval '1 millisecond' WHERE id = $1`,
      purged ? [id] : [id, retryMs],
    );
  }

  /** The workspace's unrevoked operator tokens, oldest first. */
  activeOperatorTokens(workspaceId: string): Promise<ApiToken[]> {
    return this.db
      .getRepository(ApiToken)
      .find({ where: { workspaceId, role: 'operator', revokedAt: IsNull() }, order: { createdAt: 'ASC' } });
  }

  /** Revokes every token of the workspace not yet revoked; answers their ids. */
  async revokeAllOf(workspaceId: string): Promise<string[]> {
    const rows = await queryRowsOn<{ id: string }>(
      this.db,
      `UPDATE api_tokens SET revoked_at = now() WHERE workspace_id = $1 AND revoked_at IS NULL RETURNING id`,
      [workspaceId],
    );
    return rows.map((r) => r.id);
  }

  /** Rejects a taken name with the unique violation uq_workspaces_name. */
  createWorkspace(name: string): Promise<Workspace> {
    const workspaces = this.db.getRepository(Workspace);
    return workspaces.save(workspaces.create({ name }));
  }
}
