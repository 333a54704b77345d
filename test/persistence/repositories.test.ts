import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import {
  Container,
  createDataSource,
  DEFAULT_POOL,
  Deployment,
  DeploymentVersion,
  hashToken,
  isUniqueViolation,
  Machine,
  Pool,
  ReputationScore,
  runMigrations,
  Task,
  UsageInterval,
  Workspace,
  ApiToken,
} from '#tern/persistence';
import { createTestSchema, type TestSchema } from '../support/isolation.js';

let schema: TestSchema;
let db: DataSource;

beforeAll(async () => {
  schema = await createTestSchema('repositories');
  db = await createDataSource({ url: schema.url, schema: schema.schema, runMigrations: true }).initialize();
  await runMigrations(db);
});

afterAll(async () => {
  await db?.destroy();
  await schema?.drop();
});

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected the promise to reject');
}

async function workspace(name = `ws-${randomUUID()}`): Promise<Workspace> {
  return db.getRepository(Workspace).save({ name });
}

async function deployment(ws: Workspace, name = 'llm'): Promise<Deployment> {
  return db.getRepository(Deployment).save({ workspaceId: ws.id, name, kind: 'task_queue' });
}

describe('repositories', () => {
  it('stores rows in the configured schema, with ids and timestamps from Postgres', async () => {
    const ws = await workspace('acme');
    expect(ws.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(ws.createdAt).toBeInstanceOf(Date);
    const [{ count }] = await db.query(`SELECT count(*)::int AS count FROM "${schema.schema}".workspaces WHERE name = 'acme'`);
    expect(count).toBe(1);
  });

  it('rejects a duplicate workspace name by its constraint', async () => {
    await workspace('dup');
    const error = await rejection(workspace('dup'));
    expect(isUniqueViolation(error, 'uq_workspaces_name')).toBe(true);
    expect(isUniqueViolation(error, 'uq_api_tokens_token_hash')).toBe(false);
    expect(isUniqueViolation(new Error('other'))).toBe(false);
  });

  it('finds an API token by the hash of its secret, never storing the secret', async () => {
    const ws = await workspace();
    const secret = `tern_${randomUUID().replaceAll('-', '')}`;
    await db.getRepository(ApiToken).save({
      workspaceId: ws.id,
      name: 'ci',
      tokenHash: hashToken(secret),
      prefix: secret.slice(0, 8),
      role: 'admin',
    });
    const found = await db.getRepository(ApiToken).findOneByOrFail({ tokenHash: hashToken(secret) });
    expect(found).toMatchObject({ workspaceId: ws.id, prefix: 'tern_' + secret.slice(5, 8), role: 'admin', revokedAt: null });

    const again = { workspaceId: ws.id, name: 'copy', tokenHash: hashToken(secret), prefix: 'x', role: 'member' as const };
    expect(isUniqueViolation(await rejection(db.getRepository(ApiToken).save(again)), 'uq_api_tokens_token_hash')).toBe(true);
  });

  it('keeps deployment names unique per workspace and versions unique per deployment, with a jsonb spec', async () => {
    const [a, b] = [await workspace(), await workspace()];
    const dep = await deployment(a);
    await deployment(b); // the same name in another workspace is fine
    expect(isUniqueViolation(await rejection(deployment(a)), 'uq_deployments_workspace_name')).toBe(true);
    expect(dep).toMatchObject({ state: 'pending', latestVersion: 0, stateReason: null });

    const spec = { image: 'python:3.12', handler: 'app.py:predict', gpu: 'H100', gpuCount: 1, env: { A: '1' }, volumes: [] };
    await db.getRepository(DeploymentVersion).save({ deploymentId: dep.id, version: 1, spec });
    const loaded = await db.getRepository(DeploymentVersion).findOneOrFail({
      where: { deploymentId: dep.id, version: 1 },
      relations: { deployment: true },
    });
    expect(loaded.spec).toEqual(spec);
    expect(loaded.deployment?.name).toBe('llm');

    const duplicate = db.getRepository(DeploymentVersion).save({ deploymentId: dep.id, version: 1, spec: {} });
    expect(isUniqueViolation(await rejection(duplicate), 'uq_deployment_versions_deployment_version')).toBe(true);
  });

  it('stores machines in a known pool, with GPUs as jsonb and memory as a number', async () => {
    const pool = await db.getRepository(Pool).findOneByOrFail({ name: DEFAULT_POOL });
    expect(pool).toMatchObject({ allowedGpuTypes: [], minNetworkMbps: null, minReputation: null });

    const gpus = [{ index: 0, model: 'NVIDIA H100 80GB HBM3', memoryBytes: 85_899_345_920, driverVersion: '550.54' }];
    await db.getRepository(Machine).save({ id: 'm-1', pool: DEFAULT_POOL, memoryBytes: 549_755_813_888, gpus });
    const machine = await db.getRepository(Machine).findOneByOrFail({ id: 'm-1' });
    expect(machine).toMatchObject({ state: 'pending', gpus, memoryBytes: 549_755_813_888, network: null });

    const nowhere = db.getRepository(Machine).save({ id: 'm-2', pool: 'no-such-pool' });
    expect(String(await rejection(nowhere))).toContain('fk_machines_pool');
  });

  it('reads numeric and array pool rules back as numbers and strings', async () => {
    await db.getRepository(Pool).save({ name: 'fast', allowedGpuTypes: ['H100', 'A100'], minNetworkMbps: 2500, minReputation: 0.9 });
    expect(await db.getRepository(Pool).findOneByOrFail({ name: 'fast' })).toMatchObject({
      allowedGpuTypes: ['H100', 'A100'],
      minNetworkMbps: 2500,
      minReputation: 0.9,
    });
  });

  it('keeps a task with a caller-chosen id, a jsonb payload and defaults from the schema', async () => {
    const ws = await workspace();
    const dep = await deployment(ws);
    const id = randomUUID();
    const payload = { prompt: 'hello', n: [1, 2, 3], nested: { ok: true } };
    await db.getRepository(Task).save({ id, workspaceId: ws.id, deploymentId: dep.id, payload, maxRetries: 3, timeoutSeconds: 600 });

    const task = await db.getRepository(Task).findOneByOrFail({ id });
    expect(task).toMatchObject({ state: 'PENDING', attempts: 0, payload, result: null, deploymentVersionId: null });

    await db.getRepository(Task).update({ id }, { state: 'COMPLETE', result: { text: 'hi' }, endedAt: new Date() });
    expect((await db.getRepository(Task).findOneByOrFail({ id })).result).toEqual({ text: 'hi' });
  });

  it('places a container on a machine and lets it outlive the machine', async () => {
    const dep = await deployment(await workspace());
    const version = await db.getRepository(DeploymentVersion).save({ deploymentId: dep.id, version: 1, spec: {} });
    await db.getRepository(Machine).save({ id: 'm-c', pool: DEFAULT_POOL });
    const requested = { cpuMillicores: 2000, memoryBytes: 8 << 30, gpu: 'H100', gpuCount: 1 };
    await db.getRepository(Container).save({ id: 'c-1', deploymentVersionId: version.id, machineId: 'm-c', requested });

    await db.getRepository(Machine).delete({ id: 'm-c' });
    expect(await db.getRepository(Container).findOneByOrFail({ id: 'c-1' })).toMatchObject({
      machineId: null,
      state: 'pending',
      oomKilled: false,
      requested,
    });
  });

  it('ingests a usage interval once per event id', async () => {
    const row = {
      eventId: 'evt-1',
      workspaceId: randomUUID(),
      deploymentId: randomUUID(),
      containerId: 'c-x',
      machineId: 'm-x',
      gpuType: 'H100',
      gpuCount: 1,
      cpuMillicores: 1000,
      memoryBytes: 4 * 2 ** 30,
      periodStart: new Date('2025-01-01T00:00:00Z'),
      periodEnd: new Date('2025-01-01T00:01:00Z'),
      seconds: 60,
    };
    const repo = db.getRepository(UsageInterval);
    // Fresh copies each time: TypeORM writes the generated id back into the object it inserted.
    await repo
      .createQueryBuilder()
      .insert()
      .values({ ...row })
      .orIgnore()
      .execute();
    await repo
      .createQueryBuilder()
      .insert()
      .values({ ...row })
      .orIgnore()
      .execute(); // redelivered event
    expect(await repo.findBy({ eventId: 'evt-1' })).toEqual([expect.objectContaining({ memoryBytes: 4 * 2 ** 30, seconds: 60 })]);
    expect(isUniqueViolation(await rejection(repo.insert({ ...row })), 'uq_usage_intervals_event_id')).toBe(true);
  });

  it('finds the latest reputation score of a machine', async () => {
    const repo = db.getRepository(ReputationScore);
    await repo.save({ machineId: 'm-r', score: 0.5, components: { uptime: 0.5 }, computedAt: new Date('2025-01-01T00:00:00Z') });
    await repo.save({ machineId: 'm-r', score: 0.8, components: { uptime: 0.9 }, computedAt: new Date('2025-01-02T00:00:00Z') });
    const latest = await repo.findOneOrFail({ where: { machineId: 'm-r' }, order: { computedAt: 'DESC' } });
    expect(latest).toMatchObject({ score: 0.8, components: { uptime: 0.9 } });
  });
});
