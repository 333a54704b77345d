import type { ContainerState, DeploymentKind, DeploymentState, MachineState } from '#tern/contracts';

/**
 * Test data through typed factories: each inserts one row (or one aggregate: a deployment with
 * its version) with the defaults a test does not care about, and answers the ids a test needs.
 * The SQL a test would otherwise write by hand lives here once, so a column added by a migration
 * is mended in one place. Works on a pg.Client (search_path set to the test's schema) and on a
 * TypeORM DataSource alike.
 */
export interface Sql {
  query(text: string, params?: unknown[]): Promise<unknown>;
}

async function rows<T>(db: Sql, text: string, params: unknown[] = []): Promise<T[]> {
  const result = await db.query(text, params);
  return (Array.isArray(result) ? result : (result as { rows: T[] }).rows) as T[];
}

/** A workspace; answers its id. */
export async function insertWorkspace(db: Sql, name = `ws-${Math.random().toString(36).slice(2, 10)}`): Promise<string> {
  const [w] = await rows<{ id: string }>(db, `INSERT INTO workspaces (name) VALUES ($1) RETURNING id`, [name]);
  return w.id;
}

/** A pool, with the reputation it asks of its machines when one is given. */
export async function insertPool(db: Sql, name: string, opts: { minReputation?: number } = {}): Promise<void> {
  await db.query(`INSERT INTO pools (name, min_reputation) VALUES ($1, $2)`, [name, opts.minReputation ?? null]);
}

export interface MachineRow {
  id: string;
  pool?: string;
  state?: MachineState;
}

/** Machines in the default pool, ready unless told otherwise; one already there is left as it is. */
export async function insertMachines(db: Sql, ...machines: MachineRow[]): Promise<void> {
  for (const m of machines)
    await db.query(`INSERT INTO machines (id, pool, state) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, [
      m.id,
      m.pool ?? 'default',
      m.state ?? 'ready',
    ]);
}

export interface DeploymentRow {
  workspaceId: string;
  name: string;
  kind?: DeploymentKind;
  /** The deployment's state (the column's default, `pending`, when not given). */
  state?: DeploymentState;
  /** Version 1's stored spec (`{}` when not given: most tests read only the rows around it). */
  spec?: object;
  /** Its id, when the test chooses it. */
  id?: string;
}

/** A deployment with its version 1; answers both ids. */
export async function insertDeployment(db: Sql, d: DeploymentRow): Promise<{ deploymentId: string; versionId: string }> {
  const [row] = await rows<{ id: string }>(
    db,
    `INSERT INTO deployments (id, workspace_id, name, kind, state, latest_version)
     VALUES (COALESCE($1::uuid, gen_random_uuid()), $2, $3, $4, COALESCE($5, 'pending'), 1) RETURNING id`,
    [d.id ?? null, d.workspaceId, d.name, d.kind ?? 'endpoint', d.state ?? null],
  );
  const [version] = await rows<{ id: string }>(
    db,
    `INSERT INTO deployment_versions (deployment_id, version, spec) VALUES ($1, 1, $2::jsonb) RETURNING id`,
    [row.id, JSON.stringify(d.spec ?? {})],
  );
  return { deploymentId: row.id, versionId: version.id };
}

export interface ContainerRow {
  id: string;
  versionId: string;
  machineId: string | null;
  state: ContainerState;
  /** The resources it holds (`{}` when not given). */
  requested?: object;
  createdAt?: Date;
}

/** Containers of a deployment version, each placed on its machine (or on none yet). */
export async function insertContainers(db: Sql, ...containers: ContainerRow[]): Promise<void> {
  for (const c of containers)
    await db.query(
      `INSERT INTO containers (id, deployment_version_id, machine_id, state, requested, created_at)
       VALUES ($1, $2, $3, $4, $5::jsonb, COALESCE($6, now()))`,
      [c.id, c.versionId, c.machineId, c.state, JSON.stringify(c.requested ?? {}), c.createdAt ?? null],
    );
}
