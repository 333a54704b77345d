import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Which workspace uploaded which code bundle: a deploy may name only its own workspace's
 * digests. Bundles already deployed belong to the workspaces that deployed them.
 */
export class CodeBundles1764700000000 implements MigrationInterface {
  name = 'CodeBundles1764700000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`CREATE TABLE code_bundles (
      workspace_id uuid NOT NULL,
      digest text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT pk_code_bundles PRIMARY KEY (workspace_id, digest),
      CONSTRAINT fk_code_bundles_workspace FOREIGN KEY (workspace_id) REFERENCES workspaces (id) ON DELETE CASCADE
    )`);
    await queryRunner.query(`INSERT INTO code_bundles (workspace_id, digest)
      SELECT DISTINCT d.workspace_id, v.spec->>'code'
        FROM deployment_versions v JOIN deployments d ON d.id = v.deployment_id
       WHERE v.spec->>'code' IS NOT NULL`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE code_bundles`);
  }
}
