import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A sandbox's public ports: `{<token>: <port>}`, each reached at `/sandbox-public/<token>/…`
 * without a workspace token (the token, 32 random bytes, is the URL's only secret).
 */
export class SandboxPublicPorts1765320000000 implements MigrationInterface {
  name = 'SandboxPublicPorts1765320000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE sandboxes ADD COLUMN public_ports jsonb NOT NULL DEFAULT '{}'`);
    await queryRunner.query(`CREATE INDEX ix_sandboxes_public_ports ON sandboxes USING gin (public_ports) WHERE state = 'running'`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX ix_sandboxes_public_ports`);
    await queryRunner.query(`ALTER TABLE sandboxes DROP COLUMN public_ports`);
  }
}
