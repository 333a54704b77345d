import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Metering. `metered_containers` is what metering knows of each container (its allotment, start,
 * end and how far its usage has been accrued); `usage_intervals` become per-container, per-hour
 * slices, grown by checkpoints while the container runs and made final when it ends;
 * `metered_tasks` keeps one row per task attempt. Ids from events are text (any id a contract
 * accepts), and nothing has a foreign key: usage outlives deleted deployments and machines, and
 * ingestion never waits on rows another service writes.
 */
const UP = [
  `ALTER TABLE usage_intervals ALTER COLUMN workspace_id TYPE text, ALTER COLUMN deployment_id TYPE text`,
  `ALTER TABLE usage_intervals ADD COLUMN closed boolean NOT NULL DEFAULT false`,
  `ALTER TABLE usage_intervals ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now()`,
  `CREATE INDEX ix_usage_intervals_container ON usage_intervals (container_id)`,
  `CREATE INDEX ix_usage_intervals_period ON usage_intervals (period_start)`,

  `CREATE TABLE metered_containers (
    container_id text NOT NULL,
    workspace_id text NOT NULL,
    deployment_id text NOT NULL,
    deployment_version integer NOT NULL,
    machine_id text NOT NULL,
    cpu_millicores integer,
    memory_bytes bigint,
    gpu_count integer,
    gpu_type text,
    started_at timestamptz,
    ended_at timestamptz,
    end_reason text,
    accrued_to timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT pk_metered_containers PRIMARY KEY (container_id)
  )`,
  `CREATE INDEX ix_metered_containers_ended ON metered_containers (ended_at)`,

  `CREATE TABLE metered_tasks (
    task_id text NOT NULL,
    attempt integer NOT NULL,
    workspace_id text NOT NULL,
    deployment_id text NOT NULL,
    container_id text,
    machine_id text,
    outcome text NOT NULL,
    cause text,
    duration_ms bigint,
    started_at timestamptz,
    ended_at timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT pk_metered_tasks PRIMARY KEY (task_id, attempt),
    CONSTRAINT ck_metered_tasks_outcome CHECK (outcome IN ('running', 'completed', 'failed'))
  )`,
  `CREATE INDEX ix_metered_tasks_ended ON metered_tasks (ended_at)`,
];

const DOWN = [
  `DROP TABLE metered_tasks`,
  `DROP TABLE metered_containers`,
  `DROP INDEX ix_usage_intervals_period`,
  `DROP INDEX ix_usage_intervals_container`,
  `ALTER TABLE usage_intervals DROP COLUMN updated_at`,
  `ALTER TABLE usage_intervals DROP COLUMN closed`,
  `ALTER TABLE usage_intervals ALTER COLUMN workspace_id TYPE uuid USING workspace_id::uuid, ALTER COLUMN deployment_id TYPE uuid USING deployment_id::uuid`,
];

export class Metering1764300000000 implements MigrationInterface {
  name = 'Metering1764300000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const statement of UP) await queryRunner.query(statement);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const statement of DOWN) await queryRunner.query(statement);
  }
}
