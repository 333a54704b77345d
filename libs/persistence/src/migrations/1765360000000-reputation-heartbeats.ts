import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Reputation records shared by every replica of the service: each heartbeat used to rewrite a
 * machine's whole record (tens of KB of jsonb); its punctuality now has a column of its own, so
 * a beat writes a few hundred bytes (the record's TOASTed value is kept as it is).
 * has_transitions says whether a beat may skip the record (a machine's first beat starts its
 * uptime in the record). heartbeat_at and updated_at let the scoring replica read only what
 * changed since its last pass.
 */
const UP = [
  `ALTER TABLE reputation_machines ADD COLUMN heartbeats jsonb, ADD COLUMN has_transitions boolean NOT NULL DEFAULT false,
     ADD COLUMN heartbeat_at timestamptz NOT NULL DEFAULT now()`,
  `UPDATE reputation_machines SET heartbeats = record->'heartbeats',
     has_transitions = jsonb_array_length(COALESCE(record->'transitions', '[]'::jsonb)) > 0,
     record = record - 'heartbeats'`,
  `CREATE INDEX ix_reputation_machines_updated_at ON reputation_machines (updated_at)`,
  `CREATE INDEX ix_reputation_machines_heartbeat_at ON reputation_machines (heartbeat_at)`,
];

const DOWN = [
  `DROP INDEX ix_reputation_machines_heartbeat_at`,
  `DROP INDEX ix_reputation_machines_updated_at`,
  `UPDATE reputation_machines SET record = record || jsonb_build_object('heartbeats', heartbeats) WHERE heartbeats IS NOT NULL`,
  `ALTER TABLE reputation_machines DROP COLUMN heartbeats, DROP COLUMN has_transitions, DROP COLUMN heartbeat_at`,
];

export class ReputationHeartbeats1765360000000 implements MigrationInterface {
  name = 'ReputationHeartbeats1765360000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const statement of UP) await queryRunner.query(statement);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const statement of DOWN) await queryRunner.query(statement);
  }
}
