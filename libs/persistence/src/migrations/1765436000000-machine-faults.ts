import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Faults the control plane saw on machines, waiting to be announced as `machine.fault`
 * (`MachineFaultRelay`): written in the statement that fails the container (a start command
 * unanswered, a start past the scheduler's limit, a container lost with its machine), so a
 * scheduler that dies before publishing leaves them for the next relay. No foreign key: a fault of
 * a machine deleted meanwhile is still announced.
 *
 * reputation_scores keeps, beside each score, how much of the machine's work was observed and the
 * standing that follows (`unproven` / `proven`); rows stored before say 0 and unproven.
 */
const UP = [
  `CREATE TABLE machine_fault_outbox (
    id bigserial PRIMARY KEY,
    machine_id text NOT NULL,
    kind varchar(32) NOT NULL,
    container_id text NOT NULL,
    deployment_id text NOT NULL,
    deployment_version integer NOT NULL,
    workspace_id text NOT NULL,
    after_ready boolean NOT NULL,
    reason text NOT NULL,
    at timestamptz NOT NULL DEFAULT now()
  )`,
  `ALTER TABLE reputation_scores ADD COLUMN observed double precision NOT NULL DEFAULT 0`,
  `ALTER TABLE reputation_scores ADD COLUMN standing varchar(16) NOT NULL DEFAULT 'unproven'`,
];

const DOWN = [
  `ALTER TABLE reputation_scores DROP COLUMN standing`,
  `ALTER TABLE reputation_scores DROP COLUMN observed`,
  `DROP TABLE machine_fault_outbox`,
];

export class MachineFaults1765436000000 implements MigrationInterface {
  name = 'MachineFaults1765436000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const statement of UP) await queryRunner.query(statement);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const statement of DOWN) await queryRunner.query(statement);
  }
}
