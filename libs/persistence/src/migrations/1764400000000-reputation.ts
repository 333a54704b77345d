import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Reputation: what each machine's score is computed from (state intervals, decayed outcome
 * counts per deployment, heartbeat punctuality, start latencies, the latest network test), one
 * jsonb document per machine kept by the reputation service, so a restart resumes where it was.
 * The scores themselves go to reputation_scores (history) as before.
 */
const UP = [
  `CREATE TABLE reputation_machines (
    machine_id text NOT NULL,
    pool text,
    record jsonb NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT pk_reputation_machines PRIMARY KEY (machine_id)
  )`,
];

const DOWN = [`DROP TABLE reputation_machines`];

export class Reputation1764400000000 implements MigrationInterface {
  name = 'Reputation1764400000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const statement of UP) await queryRunner.query(statement);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const statement of DOWN) await queryRunner.query(statement);
  }
}
