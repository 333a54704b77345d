import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The scheduler's machine state changes waiting to be announced (`MachineStateRelay`): a move
 * writes its row in the transaction that moves the machine, so the row lock is released without
 * waiting on NATS, and a move committed by a scheduler that dies before publishing is announced
 * by the next one. No foreign key: a machine deleted meanwhile still has its last move announced.
 */
const UP = [
  `CREATE TABLE machine_state_outbox (
    id bigserial PRIMARY KEY,
    machine_id text NOT NULL,
    pool text NOT NULL,
    from_state varchar(32),
    to_state varchar(32) NOT NULL,
    reason text NOT NULL,
    changed_at timestamptz NOT NULL
  )`,
];

const DOWN = [`DROP TABLE machine_state_outbox`];

export class MachineStateOutbox1765370000000 implements MigrationInterface {
  name = 'MachineStateOutbox1765370000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const statement of UP) await queryRunner.query(statement);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const statement of DOWN) await queryRunner.query(statement);
  }
}
