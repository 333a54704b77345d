import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What the control plane believes of each machine's hardware (libs/proof): `verification`
 * (unverified, verified, quarantined) with the reason the operator sees, when it was last
 * challenged, and when it is due again (the scheduler's MachineVerifier claims due machines by
 * moving this forward, so replicas never challenge one machine at once). Placement reads the
 * state, so the generation trigger bumps on it too.
 */
const UP = [
  `ALTER TABLE machines ADD COLUMN verification varchar(16) NOT NULL DEFAULT 'unverified'
     CONSTRAINT ck_machines_verification CHECK (verification IN ('unverified', 'verified', 'quarantined'))`,
  `ALTER TABLE machines ADD COLUMN verification_reason text`,
  `ALTER TABLE machines ADD COLUMN verification_checked_at timestamptz`,
  `ALTER TABLE machines ADD COLUMN verification_due_at timestamptz NOT NULL DEFAULT now()`,
  `CREATE INDEX ix_machines_verification_due ON machines (verification_due_at)`,
  `CREATE OR REPLACE FUNCTION bump_machine_generation() RETURNS trigger LANGUAGE plpgsql AS $$
   BEGIN
     IF NEW.state IS DISTINCT FROM OLD.state OR NEW.pool IS DISTINCT FROM OLD.pool OR NEW.cpu_threads IS DISTINCT FROM OLD.cpu_threads
        OR NEW.memory_bytes IS DISTINCT FROM OLD.memory_bytes OR NEW.gpus IS DISTINCT FROM OLD.gpus
        OR NEW.verification IS DISTINCT FROM OLD.verification THEN
       NEW.generation := OLD.generation + 1;
     END IF;
     RETURN NEW;
   END $$`,
];

const DOWN = [
  `CREATE OR REPLACE FUNCTION bump_machine_generation() RETURNS trigger LANGUAGE plpgsql AS $$
   BEGIN
     IF NEW.state IS DISTINCT FROM OLD.state OR NEW.pool IS DISTINCT FROM OLD.pool OR NEW.cpu_threads IS DISTINCT FROM OLD.cpu_threads
        OR NEW.memory_bytes IS DISTINCT FROM OLD.memory_bytes OR NEW.gpus IS DISTINCT FROM OLD.gpus THEN
       NEW.generation := OLD.generation + 1;
     END IF;
     RETURN NEW;
   END $$`,
  `DROP INDEX ix_machines_verification_due`,
  `ALTER TABLE machines DROP COLUMN verification_due_at`,
  `ALTER TABLE machines DROP COLUMN verification_checked_at`,
  `ALTER TABLE machines DROP COLUMN verification_reason`,
  `ALTER TABLE machines DROP COLUMN verification`,
];

export class MachineVerification1765500000000 implements MigrationInterface {
  name = 'MachineVerification1765500000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const statement of UP) await queryRunner.query(statement);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const statement of DOWN) await queryRunner.query(statement);
  }
}
