import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A heartbeat rewrites one row of `machines` (last_heartbeat_at) and one of
 * `reputation_machines` (heartbeats, heartbeat_at). Both times were indexed, so no such update
 * could be HOT: every beat wrote a new entry into every index of its table (machines has seven),
 * and the sweep's range over (state, last_heartbeat_at) walked the dead entries the beats left
 * (bench/agents README, run Y: no HOT update among 165,417 of machines; a batch of 500 beats'
 * updates 4.6× slower than the same without the index). Without the indexes and with room left
 * on each page, a beat's update stays on its page and touches no index. What the indexes served
 * reads every row anyway: the sweep checks every live machine once a second, the scorer every
 * record a beat changed in the last two periods (all of them, in a fleet that beats).
 * fillfactor applies to pages written from now on (VACUUM FULL rewrites the rest).
 */
export class HeartbeatHotUpdates1765700000000 implements MigrationInterface {
  name = 'HeartbeatHotUpdates1765700000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX ix_machines_state_heartbeat`);
    await queryRunner.query(`DROP INDEX ix_reputation_machines_heartbeat_at`);
    await queryRunner.query(`ALTER TABLE machines SET (fillfactor = 80)`);
    await queryRunner.query(`ALTER TABLE reputation_machines SET (fillfactor = 80)`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE reputation_machines RESET (fillfactor)`);
    await queryRunner.query(`ALTER TABLE machines RESET (fillfactor)`);
    await queryRunner.query(`CREATE INDEX ix_reputation_machines_heartbeat_at ON reputation_machines (heartbeat_at)`);
    await queryRunner.query(`CREATE INDEX ix_machines_state_heartbeat ON machines (state, last_heartbeat_at)`);
  }
}
