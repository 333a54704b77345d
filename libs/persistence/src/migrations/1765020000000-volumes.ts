import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Volumes: a workspace's named file trees. Each file row is one manifest entry (its chunks'
 * digests, in order); `version` is the volume's commit counter and, on a file, the commit that
 * last wrote it, which is how a commit tells what others changed since its base. Chunks are
 * recorded per workspace (stored once however many files hold them) for quotas and sweeping.
 */
export class Volumes1765020000000 implements MigrationInterface {
  name = 'Volumes1765020000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`CREATE TABLE volumes (
      id uuid NOT NULL DEFAULT gen_random_uuid(),
      workspace_id uuid NOT NULL,
      name text NOT NULL,
      version integer NOT NULL DEFAULT 0,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT pk_volumes PRIMARY KEY (id),
      CONSTRAINT uq_volumes_workspace_name UNIQUE (workspace_id, name),
      CONSTRAINT fk_volumes_workspace FOREIGN KEY (workspace_id) REFERENCES workspaces (id) ON DELETE CASCADE
    )`);
    await queryRunner.query(`CREATE TABLE volume_files (
      volume_id uuid NOT NULL,
      path text NOT NULL,
      size bigint NOT NULL,
      mode integer NOT NULL,
      mtime timestamptz NOT NULL,
      chunks text[] NOT NULL,
      version integer NOT NULL,
      CONSTRAINT pk_volume_files PRIMARY KEY (volume_id, path),
      CONSTRAINT fk_volume_files_volume FOREIGN KEY (volume_id) REFERENCES volumes (id) ON DELETE CASCADE
    )`);
    await queryRunner.query(`CREATE TABLE volume_chunks (
      workspace_id uuid NOT NULL,
      digest text NOT NULL,
      size integer NOT NULL,
      touched_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT pk_volume_chunks PRIMARY KEY (workspace_id, digest),
      CONSTRAINT fk_volume_chunks_workspace FOREIGN KEY (workspace_id) REFERENCES workspaces (id) ON DELETE CASCADE
    )`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE volume_chunks`);
    await queryRunner.query(`DROP TABLE volume_files`);
    await queryRunner.query(`DROP TABLE volumes`);
  }
}
