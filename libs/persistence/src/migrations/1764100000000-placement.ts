import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Placement: the containers the autoscaler's latest scale command named idle, the only ones
 * the scheduler may stop to come down to the desired count. Kept with the desired count so
 * any scheduler replica's reconcile pass can act on a command another replica consumed.
 */
const UP = [`ALTER TABLE deployment_versions ADD COLUMN idle_containers text[] NOT NULL DEFAULT '{}'`];

const DOWN = [`ALTER TABLE deployment_versions DROP COLUMN idle_containers`];

export class Placement1764100000000 implements MigrationInterface {
  name = 'Placement1764100000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const statement of UP) await queryRunner.query(statement);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const statement of DOWN) await queryRunner.query(statement);
  }
}
