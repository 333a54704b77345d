import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { Container, CrashLoopsRepository, Deployment, DeploymentVersion, Workspace } from '#tern/persistence';
import { migratedDatabase } from '../support/database.js';

const database = migratedDatabase('crash-loops-repo');
let db: DataSource;
let crashLoops: CrashLoopsRepository;

beforeAll(() => {
  db = database.db;
  crashLoops = new CrashLoopsRepository(db);
});

async function version(): Promise<DeploymentVersion> {
  const ws = await db.getRepository(Workspace).save({ name: `ws-${randomUUID()}` });
  const dep = await db.getRepository(Deployment).save({ workspaceId: ws.id, name: 'llm', kind: 'endpoint' });
  return db.getRepository(DeploymentVersion).save({ deploymentId: dep.id, version: 1, spec: {}, desiredContainers: 1 });
}

async function container(versionId: string, readyAt: Date | null = null): Promise<string> {
  const id = `c-${randomUUID()}`;
  await db.getRepository(Container).save({ id, deploymentVersionId: versionId, machineId: null, state: 'failed', requested: {}, readyAt });
  return id;
}

const crashOf = (exitCode: number) => ({ phase: 'runtime', error: `exited with code ${exitCode}`, exitCode, lastLines: ['! boom'] });
const stateOf = (id: string) => db.getRepository(DeploymentVersion).findOneByOrFail({ id });
const RESET_SECONDS = 600;

describe('CrashLoopsRepository', () => {
  it("counts a version's crashes in a row with the last one's exit code and lines, each container once", async () => {
    const v = await version();
    const [a, b] = [await container(v.id), await container(v.id)];
    await crashLoops.recordCrash(a, '2026-11-27T21:00:00Z', crashOf(3), RESET_SECONDS);
    // Delivered again: not a second crash.
    await crashLoops.recordCrash(a, '2026-11-27T21:00:00Z', crashOf(3), RESET_SECONDS);
    await crashLoops.recordCrash(b, '2026-11-27T21:00:02Z', crashOf(4), RESET_SECONDS);
    expect(await stateOf(v.id)).toMatchObject({
      crashCount: 2,
      lastCrashAt: new Date('2026-11-27T21:00:02Z'),
      lastCrash: { containerId: b, phase: 'runtime', error: 'exited with code 4', exitCode: 4, lastLines: ['! boom'] },
    });
  });

  it('starts the count over after the reset without a crash, or when the crashed container had run ready that long', async () => {
    const v = await version();
    await crashLoops.recordCrash(await container(v.id), '2026-11-27T21:00:00Z', crashOf(1), RESET_SECONDS);
    await crashLoops.recordCrash(await container(v.id), '2026-11-27T21:00:05Z', crashOf(1), RESET_SECONDS);
    expect((await stateOf(v.id)).crashCount).toBe(2);
    await crashLoops.recordCrash(await container(v.id), '2026-11-27T21:20:00Z', crashOf(1), RESET_SECONDS);
    expect((await stateOf(v.id)).crashCount).toBe(1);
    await crashLoops.recordCrash(await container(v.id), '2026-11-27T21:20:05Z', crashOf(1), RESET_SECONDS);
    expect((await stateOf(v.id)).crashCount).toBe(2);
    const servedLong = await container(v.id, new Date('2026-11-27T21:05:00Z'));
    await crashLoops.recordCrash(servedLong, '2026-11-27T21:20:10Z', crashOf(1), RESET_SECONDS);
    expect((await stateOf(v.id)).crashCount).toBe(1);
  });
});
