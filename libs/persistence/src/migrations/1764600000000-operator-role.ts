import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The operator role: platform actions (pools, machines, workspaces) need it, and no workspace
 * token can hold it. The bootstrap token (BOOTSTRAP_ADMIN_TOKEN) was a workspace admin; it
 * becomes the operator, which is what it was used as.
 */
export class OperatorRole1764600000000 implements MigrationInterface {
  name = 'OperatorRole1764600000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`UPDATE api_tokens SET role = 'operator', name = 'operator (bootstrap)' WHERE name = 'admin (bootstrap)'`);
    await queryRunner.query(`ALTER TABLE api_tokens ADD CONSTRAINT ck_api_tokens_role CHECK (role IN ('operator', 'admin', 'member'))`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE api_tokens DROP CONSTRAINT ck_api_tokens_role`);
    await queryRunner.query(`UPDATE api_tokens SET role = 'admin', name = 'admin (bootstrap)' WHERE role = 'operator'`);
  }
}
