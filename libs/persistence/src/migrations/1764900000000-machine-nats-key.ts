import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The public key of each machine's NATS user (its agent generated the key pair; the gateway
 * signs its JWTs): what the gateway revokes when the machine is deleted or changes key.
 */
export class MachineNatsKey1764900000000 implements MigrationInterface {
  name = 'MachineNatsKey1764900000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE machines ADD COLUMN nats_public_key text`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE machines DROP COLUMN nats_public_key`);
  }
}
