import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Sandboxes: containers a workspace drives over the API (see the Sandbox entity). */
export class Sandboxes1765010000000 implements MigrationInterface {
  name = 'Sandboxes1765010000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE sandboxes (
        id text PRIMARY KEY,
        workspace_id uuid NOT NULL,
        machine_id text,
        pool text NOT NULL,
        state varchar(32) NOT NULL,
        state_reason text,
        spec jsonb NOT NULL,
        requested jsonb NOT NULL,
        timeout_seconds integer NOT NULL,
        idle_timeout_seconds integer,
        ports integer[] NOT NULL DEFAULT '{}',
        created_at timestamptz NOT NULL DEFAULT now(),
        started_at timestamptz,
        active_at timestamptz NOT NULL DEFAULT now(),
        ended_at timestamptz,
        CONSTRAINT fk_sandboxes_workspace FOREIGN KEY (workspace_id) REFERENCES workspaces (id) ON DELETE CASCADE
      )`);
    await queryRunner.query(`CREATE INDEX ix_sandboxes_workspace_created ON sandboxes (workspace_id, created_at)`);
    await queryRunner.query(`CREATE INDEX ix_sandboxes_state ON sandboxes (state)`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE sandboxes`);
  }
}
