import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Task queues: which version a task belongs to, where its message sits in TASKS (so a cancel
 * or an expiry can delete it), whether it reached the stream at all (a gateway that died
 * between the insert and the publish leaves enqueued_at null, and a sweep publishes it), the
 * machine of its last attempt, and the state of its callback (delivered with retries, from
 * the row, so a restart loses none).
 */
const UP = [
  `ALTER TABLE tasks ADD COLUMN deployment_version integer NOT NULL DEFAULT 1`,
  `ALTER TABLE tasks ADD COLUMN stream_seq bigint`,
  `ALTER TABLE tasks ADD COLUMN enqueued_at timestamptz`,
  `ALTER TABLE tasks ADD COLUMN machine_id text`,
  `ALTER TABLE tasks ADD COLUMN callback_state varchar(16)`,
  `ALTER TABLE tasks ADD COLUMN callback_attempts integer NOT NULL DEFAULT 0`,
  `ALTER TABLE tasks ADD COLUMN callback_next_at timestamptz`,
  `ALTER TABLE tasks ADD CONSTRAINT ck_tasks_callback_state CHECK (callback_state IN ('pending', 'delivered', 'failed'))`,
  `CREATE INDEX ix_tasks_callback_due ON tasks (callback_next_at) WHERE callback_state = 'pending'`,
  `CREATE INDEX ix_tasks_unsent ON tasks (created_at) WHERE enqueued_at IS NULL`,
];

const DOWN = [
  `DROP INDEX ix_tasks_unsent`,
  `DROP INDEX ix_tasks_callback_due`,
  `ALTER TABLE tasks DROP CONSTRAINT ck_tasks_callback_state`,
  `ALTER TABLE tasks DROP COLUMN callback_next_at`,
  `ALTER TABLE tasks DROP COLUMN callback_attempts`,
  `ALTER TABLE tasks DROP COLUMN callback_state`,
  `ALTER TABLE tasks DROP COLUMN machine_id`,
  `ALTER TABLE tasks DROP COLUMN enqueued_at`,
  `ALTER TABLE tasks DROP COLUMN stream_seq`,
  `ALTER TABLE tasks DROP COLUMN deployment_version`,
];

export class TaskQueues1764200000000 implements MigrationInterface {
  name = 'TaskQueues1764200000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const statement of UP) await queryRunner.query(statement);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const statement of DOWN) await queryRunner.query(statement);
  }
}
