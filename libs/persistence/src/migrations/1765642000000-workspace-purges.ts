import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A deleted workspace's purge (taking what it holds) as a claimable job, so a gateway that dies
 * midway leaves it to be resumed: `deleted_by` names the token whose delete the resumed steps
 * act under, `purge_claimed_until` is the lease of the one gateway purging it now, and
 * `purged_at` says nothing is left. Workspaces deleted before this migration have no `purged_at`
 * and are purged once more, which takes nothing that is already gone.
 */
export class WorkspacePurges1765642000000 implements MigrationInterface {
  name = 'WorkspacePurges1765642000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `ALTER TABLE workspaces ADD COLUMN deleted_by text, ADD COLUMN purge_claimed_until timestamptz, ADD COLUMN purged_at timestamptz`,
    );
    await queryRunner.query(
      `CREATE INDEX ix_workspaces_unpurged ON workspaces (deleted_at) WHERE deleted_at IS NOT NULL AND purged_at IS NULL`,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX ix_workspaces_unpurged`);
    await queryRunner.query(`ALTER TABLE workspaces DROP COLUMN deleted_by, DROP COLUMN purge_claimed_until, DROP COLUMN purged_at`);
  }
}
