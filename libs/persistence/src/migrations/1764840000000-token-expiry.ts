import type { MigrationInterface, QueryRunner } from 'typeorm';

/** An API token may carry an expiry: after it the token is refused with a 401 that says so. */
export class TokenExpiry1764840000000 implements MigrationInterface {
  name = 'TokenExpiry1764840000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE api_tokens ADD COLUMN expires_at timestamptz`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE api_tokens DROP COLUMN expires_at`);
  }
}
