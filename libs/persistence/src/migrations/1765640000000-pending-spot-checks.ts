import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The spot checks still waiting on their verifiers, for the gateway's sweeper that expires those
 * whose verifier never answered: a partial index, so the sweep reads the few pending checks and
 * never the whole tasks table.
 */
export class PendingSpotChecks1765640000000 implements MigrationInterface {
  name = 'PendingSpotChecks1765640000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`CREATE INDEX ix_tasks_spot_check_pending ON tasks (ended_at) WHERE spot_check->>'state' = 'pending'`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX ix_tasks_spot_check_pending`);
  }
}
