import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Every Tern table. Names are unqualified on purpose: the connection's search_path is the
 * configured schema (see dataSourceOptions), so the same SQL serves `public` and the
 * per-test schemas. Enum-like columns are varchar rather than Postgres enums so that a new
 * state is a code change, not an ALTER TYPE. Constraint names are explicit so that callers
 * can recognise a violation (see isUniqueViolation).
 */
const UP = [
  `CREATE TABLE workspaces (
    id uuid NOT NULL DEFAULT gen_random_uuid(),
    name text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT pk_workspaces PRIMARY KEY (id),
    CONSTRAINT uq_workspaces_name UNIQUE (name)
  )`,

  `CREATE TABLE api_tokens (
    id uuid NOT NULL DEFAULT gen_random_uuid(),
    workspace_id uuid NOT NULL,
    name text NOT NULL,
    token_hash text NOT NULL,
    prefix varchar(8) NOT NULL,
    role varchar(32) NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at timestamptz,
    CONSTRAINT pk_api_tokens PRIMARY KEY (id),
    CONSTRAINT uq_api_tokens_token_hash UNIQUE (token_hash),
    CONSTRAINT fk_api_tokens_workspace FOREIGN KEY (workspace_id) REFERENCES workspaces (id) ON DELETE CASCADE
  )`,
  `CREATE INDEX ix_api_tokens_workspace ON api_tokens (workspace_id)`,

  `CREATE TABLE pools (
    id uuid NOT NULL DEFAULT gen_random_uuid(),
    name text NOT NULL,
    allowed_gpu_types text[] NOT NULL DEFAULT '{}',
    min_network_gbps numeric,
    min_reputation double precision,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT pk_pools PRIMARY KEY (id),
    CONSTRAINT uq_pools_name UNIQUE (name)
  )`,
  // Agents join POOL=default unless told otherwise; the pool must exist for their rows to.
  `INSERT INTO pools (name) VALUES ('default')`,

  `CREATE TABLE machines (
    id text NOT NULL,
    pool text NOT NULL,
    state varchar(32) NOT NULL DEFAULT 'pending',
    state_reason text,
    hostname text,
    cpu_model text,
    cpu_cores integer,
    memory_bytes bigint,
    gpus jsonb NOT NULL DEFAULT '[]',
    network jsonb,
    agent_version text,
    join_token_hash text,
    join_token_expires_at timestamptz,
    registered_at timestamptz,
    last_heartbeat_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT pk_machines PRIMARY KEY (id),
    CONSTRAINT uq_machines_join_token_hash UNIQUE (join_token_hash),
    CONSTRAINT fk_machines_pool FOREIGN KEY (pool) REFERENCES pools (name) ON UPDATE CASCADE ON DELETE RESTRICT
  )`,
  `CREATE INDEX ix_machines_pool_state ON machines (pool, state)`,

  `CREATE TABLE deployments (
    id uuid NOT NULL DEFAULT gen_random_uuid(),
    workspace_id uuid NOT NULL,
    name text NOT NULL,
    kind varchar(32) NOT NULL,
    state varchar(32) NOT NULL DEFAULT 'pending',
    state_reason text,
    latest_version integer NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT pk_deployments PRIMARY KEY (id),
    CONSTRAINT uq_deployments_workspace_name UNIQUE (workspace_id, name),
    CONSTRAINT fk_deployments_workspace FOREIGN KEY (workspace_id) REFERENCES workspaces (id) ON DELETE CASCADE
  )`,

  `CREATE TABLE deployment_versions (
    id uuid NOT NULL DEFAULT gen_random_uuid(),
    deployment_id uuid NOT NULL,
    version integer NOT NULL,
    spec jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT pk_deployment_versions PRIMARY KEY (id),
    CONSTRAINT uq_deployment_versions_deployment_version UNIQUE (deployment_id, version),
    CONSTRAINT fk_deployment_versions_deployment FOREIGN KEY (deployment_id) REFERENCES deployments (id) ON DELETE CASCADE
  )`,

  `CREATE TABLE containers (
    id text NOT NULL,
    deployment_version_id uuid NOT NULL,
    machine_id text,
    state varchar(32) NOT NULL DEFAULT 'pending',
    exit_code integer,
    oom_killed boolean NOT NULL DEFAULT false,
    requested jsonb NOT NULL,
    started_at timestamptz,
    stopped_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT pk_containers PRIMARY KEY (id),
    CONSTRAINT fk_containers_deployment_version FOREIGN KEY (deployment_version_id) REFERENCES deployment_versions (id) ON DELETE CASCADE,
    CONSTRAINT fk_containers_machine FOREIGN KEY (machine_id) REFERENCES machines (id) ON DELETE SET NULL
  )`,
  `CREATE INDEX ix_containers_deployment_version_state ON containers (deployment_version_id, state)`,
  `CREATE INDEX ix_containers_machine_state ON containers (machine_id, state)`,

  `CREATE TABLE tasks (
    id uuid NOT NULL DEFAULT gen_random_uuid(),
    workspace_id uuid NOT NULL,
    deployment_id uuid NOT NULL,
    deployment_version_id uuid,
    state varchar(32) NOT NULL DEFAULT 'PENDING',
    payload jsonb NOT NULL,
    result jsonb,
    result_ref text,
    error text,
    attempts integer NOT NULL DEFAULT 0,
    max_retries integer NOT NULL,
    timeout_seconds integer NOT NULL,
    ttl_seconds integer,
    callback_url text,
    container_id text,
    created_at timestamptz NOT NULL DEFAULT now(),
    started_at timestamptz,
    ended_at timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT pk_tasks PRIMARY KEY (id),
    CONSTRAINT fk_tasks_workspace FOREIGN KEY (workspace_id) REFERENCES workspaces (id) ON DELETE CASCADE,
    CONSTRAINT fk_tasks_deployment FOREIGN KEY (deployment_id) REFERENCES deployments (id) ON DELETE CASCADE,
    CONSTRAINT fk_tasks_deployment_version FOREIGN KEY (deployment_version_id) REFERENCES deployment_versions (id) ON DELETE SET NULL
  )`,
  `CREATE INDEX ix_tasks_deployment_state_created ON tasks (deployment_id, state, created_at)`,
  `CREATE INDEX ix_tasks_workspace_created ON tasks (workspace_id, created_at)`,

  `CREATE TABLE usage_intervals (
    id uuid NOT NULL DEFAULT gen_random_uuid(),
    event_id text NOT NULL,
    workspace_id uuid NOT NULL,
    deployment_id uuid NOT NULL,
    container_id text NOT NULL,
    machine_id text NOT NULL,
    gpu_type text,
    gpu_count integer NOT NULL DEFAULT 0,
    cpu_millicores integer NOT NULL,
    memory_bytes bigint NOT NULL,
    period_start timestamptz NOT NULL,
    period_end timestamptz NOT NULL,
    seconds double precision NOT NULL,
    CONSTRAINT pk_usage_intervals PRIMARY KEY (id),
    CONSTRAINT uq_usage_intervals_event_id UNIQUE (event_id),
    CONSTRAINT ck_usage_intervals_period CHECK (period_end >= period_start)
  )`,
  `CREATE INDEX ix_usage_intervals_workspace_period ON usage_intervals (workspace_id, period_start)`,
  `CREATE INDEX ix_usage_intervals_machine_period ON usage_intervals (machine_id, period_start)`,
  `CREATE INDEX ix_usage_intervals_deployment_period ON usage_intervals (deployment_id, period_start)`,

  `CREATE TABLE reputation_scores (
    id uuid NOT NULL DEFAULT gen_random_uuid(),
    machine_id text NOT NULL,
    score double precision NOT NULL,
    components jsonb NOT NULL DEFAULT '{}',
    computed_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT pk_reputation_scores PRIMARY KEY (id)
  )`,
  `CREATE INDEX ix_reputation_scores_machine_computed ON reputation_scores (machine_id, computed_at DESC)`,
];

const TABLES_NEWEST_FIRST = [
  'reputation_scores',
  'usage_intervals',
  'tasks',
  'containers',
  'deployment_versions',
  'deployments',
  'machines',
  'pools',
  'api_tokens',
  'workspaces',
];

export class Initial1763780000000 implements MigrationInterface {
  // TypeORM reads the timestamp off the name; set it so a minifier renaming the class cannot break it.
  name = 'Initial1763780000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const statement of UP) await queryRunner.query(statement);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const table of TABLES_NEWEST_FIRST) await queryRunner.query(`DROP TABLE ${table}`);
  }
}
