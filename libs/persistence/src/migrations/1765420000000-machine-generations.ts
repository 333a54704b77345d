import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A generation per machine, bumped by the database whenever what placement reads of the machine
 * changes: its state, pool or size (a row trigger on machines), or what is held on it (statement
 * triggers on containers and sandboxes: a row inserted, deleted, or whose state, machine or
 * requested resources changed). The scheduler keeps the pool in memory and re-reads only the
 * machines whose generation moved; it reserves optimistically, locking only the machines it chose
 * and checking their generations are still the ones it placed against (see Placer). Every writer
 * is covered because the database, not the writer, bumps the number.
 */
const UP = [
  `ALTER TABLE machines ADD COLUMN generation bigint NOT NULL DEFAULT 0`,
  `CREATE INDEX ix_machines_pool_generation ON machines (pool, id, generation)`,
  `CREATE FUNCTION bump_machine_generation() RETURNS trigger LANGUAGE plpgsql AS $$
   BEGIN
     IF NEW.state IS DISTINCT FROM OLD.state OR NEW.pool IS DISTINCT FROM OLD.pool OR NEW.cpu_threads IS DISTINCT FROM OLD.cpu_threads
        OR NEW.memory_bytes IS DISTINCT FROM OLD.memory_bytes OR NEW.gpus IS DISTINCT FROM OLD.gpus THEN
       NEW.generation := OLD.generation + 1;
     END IF;
     RETURN NEW;
   END $$`,
  `CREATE TRIGGER tr_machines_generation BEFORE UPDATE ON machines FOR EACH ROW EXECUTE FUNCTION bump_machine_generation()`,
  // Machines locked in id order, as the placer locks them: two writers never wait on each other in a circle.
  `CREATE FUNCTION bump_generation_of_holders() RETURNS trigger LANGUAGE plpgsql AS $$
   DECLARE touched text[];
   BEGIN
     IF TG_OP = 'INSERT' THEN
       SELECT array_agg(DISTINCT machine_id) INTO touched FROM new_rows WHERE machine_id IS NOT NULL;
     ELSIF TG_OP = 'DELETE' THEN
       SELECT array_agg(DISTINCT machine_id) INTO touched FROM old_rows WHERE machine_id IS NOT NULL;
     ELSE
       SELECT array_agg(DISTINCT m) INTO touched FROM old_rows o JOIN new_rows n ON n.id = o.id,
         LATERAL (VALUES (o.machine_id), (n.machine_id)) AS t(m)
       WHERE m IS NOT NULL AND (o.state IS DISTINCT FROM n.state OR o.machine_id IS DISTINCT FROM n.machine_id
         OR o.requested IS DISTINCT FROM n.requested);
     END IF;
     IF touched IS NOT NULL THEN
       PERFORM 1 FROM machines WHERE id = ANY(touched) ORDER BY id FOR UPDATE;
       UPDATE machines SET generation = generation + 1 WHERE id = ANY(touched);
     END IF;
     RETURN NULL;
   END $$`,
  ...['containers', 'sandboxes'].flatMap((table) => [
    `CREATE TRIGGER tr_${table}_generation_insert AFTER INSERT ON ${table} REFERENCING NEW TABLE AS new_rows
     FOR EACH STATEMENT EXECUTE FUNCTION bump_generation_of_holders()`,
    `CREATE TRIGGER tr_${table}_generation_update AFTER UPDATE ON ${table} REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
     FOR EACH STATEMENT EXECUTE FUNCTION bump_generation_of_holders()`,
    `CREATE TRIGGER tr_${table}_generation_delete AFTER DELETE ON ${table} REFERENCING OLD TABLE AS old_rows
     FOR EACH STATEMENT EXECUTE FUNCTION bump_generation_of_holders()`,
  ]),
];

const DOWN = [
  ...['containers', 'sandboxes'].flatMap((table) =>
    ['insert', 'update', 'delete'].map((op) => `DROP TRIGGER tr_${table}_generation_${op} ON ${table}`),
  ),
  `DROP FUNCTION bump_generation_of_holders()`,
  `DROP TRIGGER tr_machines_generation ON machines`,
  `DROP FUNCTION bump_machine_generation()`,
  `DROP INDEX ix_machines_pool_generation`,
  `ALTER TABLE machines DROP COLUMN generation`,
];

export class MachineGenerations1765420000000 implements MigrationInterface {
  name = 'MachineGenerations1765420000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const statement of UP) await queryRunner.query(statement);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const statement of DOWN) await queryRunner.query(statement);
  }
}
