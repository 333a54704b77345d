import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What the machine registry needs beyond the initial tables: the machine's long-lived
 * credential (hashed, like every token), a record of the join token's one use, when the
 * state last changed, the rest of the inventory, and the network minimum in Mbps, the unit
 * the API and the registration contract speak (Gbit/s rows are converted).
 */
const UP = [
  `ALTER TABLE pools RENAME COLUMN min_network_gbps TO min_network_mbps`,
  `ALTER TABLE pools ALTER COLUMN min_network_mbps TYPE integer USING round(min_network_mbps * 1000)::integer`,

  `ALTER TABLE machines
    ADD COLUMN credential_hash text,
    ADD COLUMN join_token_used_at timestamptz,
    ADD COLUMN state_changed_at timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN cpu_threads integer,
    ADD COLUMN os jsonb,
    ADD COLUMN disks jsonb NOT NULL DEFAULT '[]',
    ADD CONSTRAINT uq_machines_credential_hash UNIQUE (credential_hash)`,
  // The offline sweep: machines in a live state whose last heartbeat is older than the TTL.
  `CREATE INDEX ix_machines_state_heartbeat ON machines (state, last_heartbeat_at)`,

  `ALTER TABLE containers
    ADD COLUMN state_reason text,
    ADD COLUMN ready_at timestamptz`,
];

const DOWN = [
  `ALTER TABLE containers DROP COLUMN ready_at, DROP COLUMN state_reason`,
  `DROP INDEX ix_machines_state_heartbeat`,
  `ALTER TABLE machines
    DROP CONSTRAINT uq_machines_credential_hash,
    DROP COLUMN disks,
    DROP COLUMN os,
    DROP COLUMN cpu_threads,
    DROP COLUMN state_changed_at,
    DROP COLUMN join_token_used_at,
    DROP COLUMN credential_hash`,
  `ALTER TABLE pools ALTER COLUMN min_network_mbps TYPE numeric USING min_network_mbps / 1000.0`,
  `ALTER TABLE pools RENAME COLUMN min_network_mbps TO min_network_gbps`,
];

export class MachineRegistry1763900000000 implements MigrationInterface {
  name = 'MachineRegistry1763900000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const statement of UP) await queryRunner.query(statement);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const statement of DOWN) await queryRunner.query(statement);
  }
}
