import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A deleted workspace keeps its row, marked: usage intervals and metered rows name it and are
 * kept for billing, and its name is not given to another workspace (registry paths, usage
 * reports and logs that name it keep meaning one tenant).
 */
export class WorkspaceDeletes1765641000000 implements MigrationInterface {
  name = 'WorkspaceDeletes1765641000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE workspaces ADD COLUMN deleted_at timestamptz`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE workspaces DROP COLUMN deleted_at`);
  }
}
