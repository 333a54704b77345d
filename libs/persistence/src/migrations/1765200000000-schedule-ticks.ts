import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * One row per tick a schedule fired: the claim that makes a tick fire once whatever the number
 * of scheduler replicas (the first insert of (deployment, tick time) wins), and the task it made.
 */
const UP = [
  `CREATE TABLE schedule_ticks (
    deployment_id uuid NOT NULL REFERENCES deployments(id) ON DELETE CASCADE,
    tick_at timestamptz NOT NULL,
    task_id uuid NOT NULL,
    fired_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (deployment_id, tick_at)
  )`,
];

export class ScheduleTicks1765200000000 implements MigrationInterface {
  name = 'ScheduleTicks1765200000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const statement of UP) await queryRunner.query(statement);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE schedule_ticks`);
  }
}
