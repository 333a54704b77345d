import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { TransactionalRepository } from './transactional.repository.js';

/** What the API may say about a secret: never its value. */
export interface SecretSummary {
  name: string;
  bytes: number;
  createdAt: Date;
  updatedAt: Date;
}

const SUMMARY = `SELECT name, bytes, created_at AS "createdAt", updated_at AS "updatedAt" FROM workspace_secrets`;

/** Workspace secrets, sealed; every method names the workspace, so none reaches another's. */
@Injectable()
export class SecretsRepository extends TransactionalRepository {
  constructor(db: DataSource) {
    super(db);
  }

  /** Creates or replaces; whether it replaced one. */
  async put(workspaceId: string, name: string, sealed: string, bytes: number): Promise<{ summary: SecretSummary; replaced: boolean }> {
    const [row] = await this.rows<SecretSummary & { replaced: boolean }>(
      `INSERT INTO workspace_secrets (workspace_id, name, sealed, bytes) VALUES ($1, $2, $3, $4)
       ON CONFLICT (workspace_id, name) DO UPDATE SET sealed = EXCLUDED.sealed, bytes = EXCLUDED.bytes, updated_at = now()
       RETURNING name, bytes, created_at AS "createdAt", updated_at AS "updatedAt", (xmax <> 0) AS replaced`,
      [workspaceId, name, sealed, bytes],
    );
    const { replaced, ...summary } = row!;
    return { summary, replaced };
  }

  list(workspaceId: string): Promise<SecretSummary[]> {
    return this.rows<SecretSummary>(`${SUMMARY} WHERE workspace_id = $1 ORDER BY name`, [workspaceId]);
  }

  async sealedValue(workspaceId: string, name: string): Promise<string | undefined> {
    const [row] = await this.rows<{ sealed: string }>(`SELECT sealed FROM workspace_secrets WHERE workspace_id = $1 AND name = $2`, [
      workspaceId,
      name,
    ]);
    return row?.sealed;
  }

  async remove(workspaceId: string, name: string): Promise<boolean> {
    const rows = await this.rows<{ name: string }>(`DELETE FROM workspace_secrets WHERE workspace_id = $1 AND name = $2 RETURNING name`, [
      workspaceId,
      name,
    ]);
    return rows.length > 0;
  }
}
