import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Workspace secrets (registry credentials first): the value only sealed (AES-256-GCM under the
 * gateway's SECRETS_KEY, bound to the workspace and the name), never in clear.
 */
export class WorkspaceSecrets1765310000000 implements MigrationInterface {
  name = 'WorkspaceSecrets1765310000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`CREATE TABLE workspace_secrets (
      workspace_id uuid NOT NULL,
      name text NOT NULL,
      sealed text NOT NULL,
      bytes integer NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT pk_workspace_secrets PRIMARY KEY (workspace_id, name),
      CONSTRAINT fk_workspace_secrets_workspace FOREIGN KEY (workspace_id) REFERENCES workspaces (id) ON DELETE CASCADE
    )`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE workspace_secrets`);
  }
}
