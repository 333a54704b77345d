import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import type { ContainerState } from '#tern/contracts';
import { Container, Deployment, DeploymentsRepository, DeploymentVersion, Workspace } from '#tern/persistence';
import { migratedDatabase } from '../support/database.js';

const database = migratedDatabase('deploymentsrepo');
let db: DataSource;
let deployments: DeploymentsRepository;

beforeAll(async () => {
  db = database.db;
  deployments = new DeploymentsRepository(db);
});

const workspace = async () => (await db.getRepository(Workspace).save({ name: `ws-${randomUUID()}` })).id;
const requested = { cpuMillicores: 1000, memoryBytes: 1 << 30, gpuCount: 0 };

async function container(versionId: string, state: ContainerState, ageMinutes = 0): Promise<string> {
  const id = `c-${randomUUID()}`;
  await db.getRepository(Container).save({ id, deploymentVersionId: versionId, state, stateReason: `is ${state}`, requested });
  if (ageMinutes)
    await db.query(
      `UPDATE containers SET updated_at = now() - $2 * interval '1 minute', created_at = now() - $2 * interval '1 minute' WHERE id = $1`,
      [id, ageMinutes],
    );
  return id;
}

describe('DeploymentsRepository', () => {
  it('adds consecutive versions, creating the deployment on the first, even when deploys race', async () => {
    const ws = await workspace();
    const first = await deployments.addVersion(ws, 'llm', 'endpoint', { image: 'a' });
    expect(first.version).toBe(1);
    expect(first.deployment).toMatchObject({
      workspaceId: ws,
      name: 'llm',
      kind: 'endpoint',
      state: 'ready',
      latestVersion: 1,
      stateReason: null,
    });
    const raced = await Promise.all([1, 2, 3, 4].map((n) => deployments.addVersion(ws, 'llm', 'task_queue', { image: `b${n}` })));
    expect(raced.map((r) => r.version).sort()).toEqual([2, 3, 4, 5]);
    expect(new Set(raced.map((r) => r.deployment.id))).toEqual(new Set([first.deployment.id]));
    const versions = await deployments.versionsOf(first.deployment.id, 'DESC');
    expect(versions.map((v) => v.version)).toEqual([5, 4, 3, 2, 1]);
    expect((await deployments.versionsOf(first.deployment.id, 'ASC'))[0].spec).toEqual({ image: 'a' });
    expect(await deployments.findById(first.deployment.id)).toMatchObject({ latestVersion: 5, kind: 'task_queue' });
  });

  it('revives a deleted deployment on its next version', async () => {
    const ws = await workspace();
    const { deployment } = await deployments.addVersion(ws, 'gone', 'endpoint', {});
    await deployments.setState(deployment, 'deleted', 'deleted by someone');
    expect(await deployments.findByName(ws, 'gone')).toMatchObject({ state: 'deleted', stateReason: 'deleted by someone' });
    const again = await deployments.addVersion(ws, 'gone', 'endpoint', {});
    expect(again).toMatchObject({ version: 2, deployment: { state: 'ready', stateReason: null } });
  });

  it('finds by name within the workspace only', async () => {
    const ws = await workspace();
    await deployments.addVersion(ws, 'mine', 'endpoint', {});
    expect(await deployments.findByName(ws, 'mine')).toMatchObject({ name: 'mine' });
    expect(await deployments.findByName(await workspace(), 'mine')).toBeNull();
    expect((await deployments.listAll()).map((d) => d.workspaceId)).toContain(ws);
  });

  it('counts desired over all versions and actual over active containers, leaving deleted deployments out', async () => {
    const ws = await workspace();
    const { deployment } = await deployments.addVersion(ws, 'b-web', 'endpoint', {});
    await deployments.addVersion(ws, 'b-web', 'endpoint', {});
    const [v2, v1] = await deployments.versionsOf(deployment.id, 'DESC');
    await db.getRepository(DeploymentVersion).update(v1.id, { desiredContainers: 1 });
    await db.getRepository(DeploymentVersion).update(v2.id, { desiredContainers: 2, placementReason: 'no machine with an H100' });
    await container(v1.id, 'running');
    await container(v2.id, 'starting');
    await container(v2.id, 'pending');
    await container(v2.id, 'stopped');
    const other = await deployments.addVersion(ws, 'a-old', 'endpoint', {});
    await deployments.setState(other.deployment, 'stopped', 'stopped by me');
    const deleted = await deployments.addVersion(ws, 'c-gone', 'endpoint', {});
    await deployments.setState(deleted.deployment, 'deleted', 'deleted by me');

    const list = await deployments.listWithCounts(ws);
    expect(list.map((d) => d.name)).toEqual(['a-old', 'b-web']);
    expect(list[0]).toMatchObject({ state: 'stopped', stateReason: 'stopped by me', desired: 0, actual: 0, placementReason: null });
    expect(list[1]).toMatchObject({
      id: deployment.id,
      kind: 'endpoint',
      latestVersion: 2,
      desired: 3,
      actual: 2,
      placementReason: 'no machine with an H100',
      updatedAt: expect.any(Date),
    });
    expect(await deployments.findWithCounts(ws, 'b-web')).toEqual(list[1]);
    expect(await deployments.findWithCounts(ws, 'c-gone')).toBeUndefined();
  });

  it('lists the containers not yet stopped or failed, oldest first, and the recently ended ones too (with their machines, for logs)', async () => {
    const ws = await workspace();
    const { deployment } = await deployments.addVersion(ws, 'logs', 'endpoint', {});
    const [v1] = await deployments.versionsOf(deployment.id, 'ASC');
    const older = await container(v1.id, 'running', 2);
    const newer = await container(v1.id, 'scheduled');
    const justStopped = await container(v1.id, 'stopped');
    const longFailed = await container(v1.id, 'failed', 30);
    const live = await deployments.containersOf(deployment.id);
    expect(live.map((c) => c.id)).toEqual([older, newer]);
    expect(live[0]).toEqual({ id: older, version: 1, machineId: null, state: 'running', stateReason: 'is running', readyAt: null });
    const recent = await deployments.recentContainerPlacements(deployment.id);
    const ids = recent.map((c) => c.id);
    expect(ids.sort()).toEqual([older, newer, justStopped].sort());
    expect(ids).not.toContain(longFailed);
    expect(recent.every((c) => c.machineId === null)).toBe(true);
  });

  it('sets a state with its reason and answers the saved row', async () => {
    const ws = await workspace();
    const { deployment } = await deployments.addVersion(ws, 'st', 'endpoint', {});
    const saved = await deployments.setState(deployment, 'stopped', 'stopped by t');
    expect(saved).toMatchObject({ state: 'stopped', stateReason: 'stopped by t' });
    expect(await db.getRepository(Deployment).findOneByOrFail({ id: deployment.id })).toMatchObject({
      state: 'stopped',
      stateReason: 'stopped by t',
    });
    await deployments.setState(saved, 'ready', null);
    expect(await deployments.findByName(ws, 'st')).toMatchObject({ state: 'ready', stateReason: null });
  });
});
