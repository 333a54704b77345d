import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A task's spot check (a deployment's `verify: {sample}`): which machine's result was checked, by
 * which verifier, the digests compared and the verdict (TaskSpotCheckRecord). Null for a task
 * not checked.
 */
export class TaskSpotChecks1765600000000 implements MigrationInterface {
  name = 'TaskSpotChecks1765600000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE tasks ADD COLUMN spot_check jsonb`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE tasks DROP COLUMN spot_check`);
  }
}
