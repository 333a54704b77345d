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

  /** Which of `names` the workspace holds. */
  async existing(workspaceId: string, names: readonly string[]): Promise<string[]> {
    const rows = await this.rows<{ name: string }>(
      `SELECT name FROM workspace_secrets WHERE workspace_id = $1 AND name = ANY($2::text[])`,
      [workspaceId, names],
    );
    return rows.map((r) => r.name);
  }

  /**
   * The secrets a container's version names (its spec's `secrets`) and their sealed values, if
   * the container is placed on `machineId` and still starting (not yet running, stopped or
   * failed): the only moment its agent needs them. undefined otherwise; a secret removed since
   * the deploy comes back with sealed null.
   */
  async ofStartingContainer(
    machineId: string,
    containerId: string,
  ): Promise<{ workspaceId: string; secrets: { name: string; sealed: string | null }[] } | undefined> {
    const rows = await this.rows<{ workspaceId: string; name: string | null; sealed: string | null }>(
      `SELECT d.workspace_id::text AS "workspaceId", n.name, s.sealed
         FROM containers c
         JOIN deployment_versions dv ON dv.id = c.deployment_version_id
         JOIN deployments d ON d.id = dv.deployment_id
         LEFT JOIN LATERAL jsonb_array_elements_text(coalesce(dv.spec->'secrets', '[]'::jsonb)) AS n(name) ON true
         LEFT JOIN workspace_secrets s ON s.workspace_id = d.workspace_id AND s.name = n.name
        WHERE c.id = $2 AND c.machine_id = $1 AND c.state IN ('pending', 'scheduled', 'starting')`,
      [machineId, containerId],
    );
    if (!rows.length) return undefined;
    return {
      workspaceId: rows[0].workspaceId,
      secrets: rows.filter((r) => r.name !== null).map((r) => ({ name: r.name!, sealed: r.sealed })),
    };
  }

  async remove(workspaceId: string, name: string): Promise<boolean> {
    const rows = await this.rows<{ name: string }>(`DELETE FROM workspace_secrets WHERE workspace_id = $1 AND name = $2 RETURNING name`, [
      workspaceId,
      name,
    ]);
    return rows.length > 0;
  }

  /** Destroys every secret of the workspace; answers how many. */
  async removeAll(workspaceId: string): Promise<number> {
    return (await this.rows<{ name: string }>(`DELETE FROM workspace_secrets WHERE workspace_id = $1 RETURNING name`, [workspaceId]))
      .length;
  }
}
