import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Integrators' NATS users (`tern nats user create`): what the gateway lists and revokes. */
export class NatsUsers1765000000000 implements MigrationInterface {
  name = 'NatsUsers1765000000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`CREATE TABLE nats_users (
      id uuid NOT NULL DEFAULT gen_random_uuid(),
      workspace_id uuid NOT NULL,
      name text NOT NULL,
      public_key text NOT NULL,
      scopes text[] NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      revoked_at timestamptz,
      CONSTRAINT pk_nats_users PRIMARY KEY (id),
      CONSTRAINT uq_nats_users_public_key UNIQUE (public_key),
      CONSTRAINT fk_nats_users_workspace FOREIGN KEY (workspace_id) REFERENCES workspaces (id) ON DELETE CASCADE
    )`);
    await queryRunner.query(`CREATE INDEX ix_nats_users_workspace ON nats_users (workspace_id)`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE nats_users`);
  }
}
