import { randomUUID } from 'node:crypto';
import { Deployment, MapsRepository, Workspace } from '#tern/persistence';
import { againstIdOrderedLocks, migratedDatabase } from '../support/database.js';

const database = migratedDatabase('mapsrepo');

describe('MapsRepository', () => {
  it("cancels a map's chunks locking their tasks in id order, so the map's own publishes and starts meanwhile wait instead of deadlocking", async () => {
    const db = database.db;
    const maps = new MapsRepository(db);
    const workspaceId = (await db.getRepository(Workspace).save({ name: 'maps' })).id;
    const deploymentId = (
      await db.getRepository(Deployment).save({ workspaceId, name: 'fn', kind: 'function', state: 'ready', latestVersion: 1 })
    ).id;
    const mapId = randomUUID();
    await maps.create({
      id: mapId,
      workspaceId,
      deploymentId,
      version: 1,
      chunkSize: 1,
      returnExceptions: false,
      order: 'input',
      maxRetries: 0,
      timeoutSeconds: 60,
    });
    await maps.stage(mapId, [
      { chunk: 0, firstIndex: 0, inputs: [{ n: 0 }] },
      { chunk: 1, firstIndex: 1, inputs: [{ n: 1 }] },
    ]);
    // The first chunk's task gets the higher id: a statement locking in chunk order would take it first.
    const [high, low] = ['ffffffff-ffff-4fff-bfff-ffffffffffff', '00000000-0000-4000-8000-000000000000'];
    await db.query(`UPDATE map_chunks SET task_id = CASE chunk WHEN 0 THEN $2::uuid ELSE $3::uuid END WHERE map_id = $1`, [
      mapId,
      high,
      low,
    ]);
    expect(await maps.accept(mapId, 2)).toBe(true);

    const cancelled = await againstIdOrderedLocks(db, low, high, () => maps.cancelTasks(mapId, 'cancelled: its map was cancelled'));
    expect(cancelled.map((c) => c.id).sort()).toEqual([low, high]);
  });
});
