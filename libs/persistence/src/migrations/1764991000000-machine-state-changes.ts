import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Every state a machine entered, with its reason: the dashboard's machine page
 * (`GET /api/v1/machines/<id>/state-changes`). A trigger writes it, so every path that moves a
 * machine (registration, heartbeats and admission, the offline sweep, pool changes) is recorded
 * in the same transaction as the move, whichever statement made it.
 */
const UP = [
  `CREATE TABLE machine_state_changes (
    id bigserial PRIMARY KEY,
    machine_id text NOT NULL REFERENCES machines(id) ON DELETE CASCADE,
    at timestamptz NOT NULL,
    from_state varchar(32),
    to_state varchar(32) NOT NULL,
    reason text
  )`,
  `CREATE INDEX ix_machine_state_changes_machine_at ON machine_state_changes (machine_id, at)`,
  `CREATE FUNCTION record_machine_state_change() RETURNS trigger LANGUAGE plpgsql AS $$
   BEGIN
     IF TG_OP = 'INSERT' OR OLD.state IS DISTINCT FROM NEW.state THEN
       INSERT INTO machine_state_changes (machine_id, at, from_state, to_state, reason)
       VALUES (NEW.id, coalesce(NEW.state_changed_at, now()), CASE WHEN TG_OP = 'UPDATE' THEN OLD.state END, NEW.state, NEW.state_reason);
     END IF;
     RETURN NEW;
   END $$`,
  `CREATE TRIGGER tr_machine_state_changes AFTER INSERT OR UPDATE OF state ON machines
   FOR EACH ROW EXECUTE FUNCTION record_machine_state_change()`,
];

const DOWN = [
  `DROP TRIGGER tr_machine_state_changes ON machines`,
  `DROP FUNCTION record_machine_state_change()`,
  `DROP TABLE machine_state_changes`,
];

export class MachineStateChanges1764991000000 implements MigrationInterface {
  name = 'MachineStateChanges1764991000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const statement of UP) await queryRunner.query(statement);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const statement of DOWN) await queryRunner.query(statement);
  }
}
