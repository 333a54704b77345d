import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A version's crash loop (CrashLoopsRepository): how many of its containers crashed in a row, when
 * the last did, and what it said (exit code, error, last log lines). The scheduler waits longer
 * before each next start; the API shows it in `tern deployments <name>`.
 */
const UP = [
  `ALTER TABLE deployment_versions ADD COLUMN crash_count integer NOT NULL DEFAULT 0`,
  `ALTER TABLE deployment_versions ADD COLUMN last_crash_at timestamptz`,
  `ALTER TABLE deployment_versions ADD COLUMN last_crash jsonb`,
];

const DOWN = [
  `ALTER TABLE deployment_versions DROP COLUMN last_crash`,
  `ALTER TABLE deployment_versions DROP COLUMN last_crash_at`,
  `ALTER TABLE deployment_versions DROP COLUMN crash_count`,
];

export class CrashLoops1765450000000 implements MigrationInterface {
  name = 'CrashLoops1765450000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const statement of UP) await queryRunner.query(statement);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const statement of DOWN) await queryRunner.query(statement);
  }
}
