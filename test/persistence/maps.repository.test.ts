import { randomUUID } from 'node:crypto';
import { Deployment, type InputOutcome, MapsRepository, Workspace } from '#tern/persistence';
import { againstIdOrderedLocks, migratedDatabase } from '../support/database.js';

const database = migratedDatabase('mapsrepo');

/** A map of `inputs` inputs in chunks of one, staged (not yet accepted: no tasks). */
async function stagedMap(maps: MapsRepository, returnExceptions: boolean, inputs: number): Promise<{ mapId: string; workspaceId: string }> {
  const db = database.db;
  const workspaceId = (await db.getRepository(Workspace).save({ name: `maps-${randomUUID().slice(0, 8)}` })).id;
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
    returnExceptions,
    order: 'input',
    maxRetries: 0,
    timeoutSeconds: 60,
  });
  await maps.stage(
    mapId,
    Array.from({ length: inputs }, (_, n) => ({ chunk: n, firstIndex: n, inputs: [{ n }] })),
  );
  return { mapId, workspaceId };
}

/** The same, accepted: a task per chunk. */
async function acceptedMap(maps: MapsRepository, returnExceptions: boolean, inputs: number) {
  const staged = await stagedMap(maps, returnExceptions, inputs);
  expect(await maps.accept(staged.mapId, inputs)).toBe(true);
  return staged;
}

const ok = (n: number): InputOutcome[] => [{ status: 'ok', result: { n } }];

describe('MapsRepository', () => {
  it('settles many chunks of a map in one statement, each once, and completes the map with the last', async () => {
    const maps = new MapsRepository(database.db);
    const { mapId, workspaceId } = await acceptedMap(maps, false, 3);
    expect(
      await maps.settleMany(
        mapId,
        [0, 1].map((chunk) => ({ chunk, outcomes: ok(chunk) })),
      ),
    ).toEqual({ state: 'running', chunks: [0, 1] });
    // Chunk 1 again (another replica, or a sweep beside a notice): settled once, not counted twice.
    expect(
      await maps.settleMany(
        mapId,
        [1, 2].map((chunk) => ({ chunk, outcomes: ok(chunk) })),
      ),
    ).toEqual({ state: 'complete', chunks: [2] });
    expect(await maps.settleMany(mapId, [{ chunk: 2, outcomes: ok(2) }])).toBeUndefined();
    const settled = await maps.inInputOrder(mapId, 0, 10);
    expect(settled.map((c) => c.outcomes)).toEqual([ok(0), ok(1), ok(2)]);
    expect(new Set(settled.map((c) => c.settledSeq)).size).toBe(3);
    expect(await maps.findInWorkspace(mapId, workspaceId)).toMatchObject({
      state: 'complete',
      succeeded: 3,
      failed: 0,
    });
  });

  it('leaves a map without return_exceptions running when its last chunks settle with an error, for the settler to fail it', async () => {
    const maps = new MapsRepository(database.db);
    const { mapId: failing } = await acceptedMap(maps, false, 2);
    const withError = [
      { chunk: 0, outcomes: [{ status: 'error', error: 'ValueError: no' }] as InputOutcome[] },
      { chunk: 1, outcomes: ok(1) },
    ];
    expect(await maps.settleMany(failing, withError)).toEqual({ state: 'running', chunks: [0, 1] });
    expect(await maps.end(failing, 'failed', 'input 0: ValueError: no')).toBe(true);
    // Keeping errors in place, the same outcomes complete the map.
    const { mapId: keeping } = await acceptedMap(maps, true, 2);
    expect(await maps.settleMany(keeping, withError)).toEqual({ state: 'complete', chunks: [0, 1] });
  });

  it("cancels a map's chunks locking their tasks in id order, so the map's own publishes and starts meanwhile wait instead of deadlocking", async () => {
    const db = database.db;
    const maps = new MapsRepository(db);
    const { mapId } = await stagedMap(maps, false, 2);
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
