import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What endpoints need: the desired container count per deployment version (set by the
 * scheduler from the autoscaler's scale commands), why it was set, and why placement cannot
 * meet it (no machine fits), which `tern deployments` shows.
 */
const UP = [
  `ALTER TABLE deployment_versions
    ADD COLUMN desired_containers integer NOT NULL DEFAULT 0,
    ADD COLUMN desired_reason text,
    ADD COLUMN desired_at timestamptz,
    ADD COLUMN placement_reason text`,
  `CREATE INDEX ix_deployment_versions_desired ON deployment_versions (desired_containers) WHERE desired_containers > 0`,
];

const DOWN = [
  `DROP INDEX ix_deployment_versions_desired`,
  `ALTER TABLE deployment_versions
    DROP COLUMN placement_reason,
    DROP COLUMN desired_at,
    DROP COLUMN desired_reason,
    DROP COLUMN desired_containers`,
];

export class ScaleTargets1764000000000 implements MigrationInterface {
  name = 'ScaleTargets1764000000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const statement of UP) await queryRunner.query(statement);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const statement of DOWN) await queryRunner.query(statement);
  }
}
