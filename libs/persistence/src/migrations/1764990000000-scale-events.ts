import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Every change of a deployment version's desired container count, with the autoscaler's reason:
 * the dashboard's desired-vs-actual chart (`GET /api/v1/deployments/<name>/scale-events`).
 * Written by the scheduler in the statement that applies the scale command.
 */
const UP = [
  `CREATE TABLE scale_events (
    id bigserial PRIMARY KEY,
    deployment_id uuid NOT NULL REFERENCES deployments(id) ON DELETE CASCADE,
    version integer NOT NULL,
    at timestamptz NOT NULL,
    desired integer NOT NULL,
    previous integer NOT NULL,
    reason text
  )`,
  `CREATE INDEX ix_scale_events_deployment_at ON scale_events (deployment_id, at)`,
];

const DOWN = [`DROP TABLE scale_events`];

export class ScaleEvents1764990000000 implements MigrationInterface {
  name = 'ScaleEvents1764990000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const statement of UP) await queryRunner.query(statement);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const statement of DOWN) await queryRunner.query(statement);
  }
}
