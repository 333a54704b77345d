import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Why a task's last callback attempt failed: shown with the task, so a refused callback_url says why. */
export class CallbackError1764500000000 implements MigrationInterface {
  name = 'CallbackError1764500000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE tasks ADD COLUMN callback_error text`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE tasks DROP COLUMN callback_error`);
  }
}
