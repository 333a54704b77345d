import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Maps of a function over many inputs: the map, and its chunks (a run of inputs that is one task).
 * A chunk's inputs are staged on its row while the body streams in; once every input is in, one
 * statement makes a task of each chunk and clears the staging. A chunk is settled once its task
 * ended: its per-input outcomes copied beside it (what /results streams) and a number from
 * map_settle_seq (completion order). The counts on the map are kept by the same statement.
 */
const UP = [
  `CREATE TABLE maps (
    id uuid PRIMARY KEY,
    workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    deployment_id uuid NOT NULL REFERENCES deployments(id) ON DELETE CASCADE,
    deployment_version integer NOT NULL,
    state varchar(16) NOT NULL CONSTRAINT ck_maps_state CHECK (state IN ('accepting', 'running', 'complete', 'failed', 'cancelled')),
    total integer NOT NULL DEFAULT 0,
    chunk_size integer NOT NULL,
    return_exceptions boolean NOT NULL,
    result_order varchar(16) NOT NULL CONSTRAINT ck_maps_order CHECK (result_order IN ('input', 'completion')),
    max_retries integer NOT NULL,
    timeout_seconds integer NOT NULL,
    succeeded integer NOT NULL DEFAULT 0,
    failed integer NOT NULL DEFAULT 0,
    cancelled integer NOT NULL DEFAULT 0,
    error text,
    created_at timestamptz NOT NULL DEFAULT now(),
    accepted_at timestamptz,
    ended_at timestamptz
  )`,
  `CREATE INDEX ix_maps_workspace ON maps (workspace_id, created_at DESC)`,
  `CREATE TABLE map_chunks (
    map_id uuid NOT NULL REFERENCES maps(id) ON DELETE CASCADE,
    chunk integer NOT NULL,
    first_index integer NOT NULL,
    size integer NOT NULL,
    task_id uuid NOT NULL UNIQUE,
    inputs jsonb,
    outcomes jsonb,
    settled_seq bigint,
    PRIMARY KEY (map_id, chunk)
  )`,
  `CREATE INDEX ix_map_chunks_unsettled ON map_chunks (map_id, chunk) WHERE settled_seq IS NULL`,
  `CREATE INDEX ix_map_chunks_settled ON map_chunks (map_id, settled_seq) WHERE settled_seq IS NOT NULL`,
  `CREATE SEQUENCE map_settle_seq`,
];

const DOWN = [`DROP SEQUENCE map_settle_seq`, `DROP TABLE map_chunks`, `DROP TABLE maps`];

export class FunctionMaps1765100000000 implements MigrationInterface {
  name = 'FunctionMaps1765100000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const statement of UP) await queryRunner.query(statement);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const statement of DOWN) await queryRunner.query(statement);
  }
}
