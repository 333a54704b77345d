import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Endpoint requests per deployment version and minute, summed over gateways: count, 5xx, and
 * a latency histogram (counts per bucket of REQUEST_SECONDS_BUCKETS, the last one +Inf), from
 * which `GET /api/v1/deployments/<name>/requests` derives rates and percentiles. Each gateway
 * adds what it saw every few seconds.
 */
const UP = [
  `CREATE TABLE endpoint_request_minutes (
    deployment_id uuid NOT NULL REFERENCES deployments(id) ON DELETE CASCADE,
    version integer NOT NULL,
    minute timestamptz NOT NULL,
    requests integer NOT NULL,
    errors integer NOT NULL,
    buckets integer[] NOT NULL,
    PRIMARY KEY (deployment_id, version, minute)
  )`,
];

const DOWN = [`DROP TABLE endpoint_request_minutes`];

export class EndpointRequestMinutes1764992000000 implements MigrationInterface {
  name = 'EndpointRequestMinutes1764992000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const statement of UP) await queryRunner.query(statement);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const statement of DOWN) await queryRunner.query(statement);
  }
}
