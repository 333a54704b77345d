import pg from 'pg';
import type { DataSource } from 'typeorm';
import { ContainersRepository, createDataSource, ReputationRepository, runMigrations } from '#tern/persistence';
import type { PlacementRequest } from '#tern/placement';
import { Placer } from '../../apps/scheduler/src/placement/placer.js';
import type { ReputationScores } from '../../apps/scheduler/src/placement/reputation-scores.js';
import { createTestSchema, type TestSchema } from '../support/isolation.js';
import { insertDeployment, insertPool, insertWorkspace } from '../support/rows.js';
import { addMachine, GiB } from './harness.js';

/** Placer.reserveMany straight on Postgres: two replicas racing into one small pool, optimistically. */
describe('optimistic reservation', () => {
  let schema: TestSchema;
  const sources: DataSource[] = [];
  let db: pg.Client;
  let versionId: string;
  const placer = async () => {
    const source = await createDataSource({ url: schema.url, schema: schema.schema, runMigrations: false }).initialize();
    sources.push(source);
    // The reputation bucket not answering: stored scores are read (there are none).
    const mirror = { scores: () => undefined } as unknown as ReputationScores;
    return new Placer(new ContainersRepository(source), new ReputationRepository(source), mirror);
  };
  const REQUEST: PlacementRequest = { cpuMillicores: 1000, memoryBytes: GiB, gpuTypes: ['H100'], gpuCount: 1, pool: 'race' };
  const held = async () =>
    (
      await db.query<{ machine_id: string; cpu: string; gpus: number[] }>(
        `SELECT machine_id, sum((requested->>'cpuMillicores')::int) AS cpu,
                array_agg(g::int ORDER BY g::int) AS gpus
         FROM containers, jsonb_array_elements_text(requested->'gpuIndexes') g
         WHERE state IN ('scheduled', 'starting', 'running') GROUP BY machine_id ORDER BY machine_id`,
      )
    ).rows;

  beforeAll(async () => {
    schema = await createTestSchema('reserve');
    const first = await createDataSource({ url: schema.url, schema: schema.schema, runMigrations: true }).initialize();
    await runMigrations(first);
    await first.destroy();
    db = new pg.Client({ connectionString: schema.url, options: `-c search_path=${schema.schema}` });
    await db.connect();
    await insertPool(db, 'race');
    // Six machines of 2 GPUs and 4 CPUs: room for 12 of the containers, GPUs binding.
    for (let i = 0; i < 6; i++) await addMachine(db, `r-${i}`, { pool: 'race', cpus: 4, memoryGiB: 64, gpus: ['H100', 'H100'] });
    const workspaceId = await insertWorkspace(db, 'acme');
    ({ versionId } = await insertDeployment(db, { workspaceId, name: 'r', state: 'ready' }));
  });

  afterAll(async () => {
    for (const s of sources) await s.destroy();
    await db?.end();
    await schema?.drop();
  });

  it('never gives a GPU twice or a CPU beyond the machine while two replicas race, and sees room freed by any writer', async () => {
    const replicas = [await placer(), await placer()];
    // 32 asked for 12 places, both replicas at once, each with its own in-memory pool.
    const reservations = await Promise.all(
      replicas.map(async (p) => {
        const placed: string[] = [];
        for (let i = 0; i < 8; i++) placed.push(...(await p.reserveMany(versionId, REQUEST, 2, 'race')).placed.map((c) => c.machineId));
        return placed;
      }),
    );
    expect(reservations.flat()).toHaveLength(12);
    const rows = await held();
    expect(rows.map((r) => [r.machine_id, Number(r.cpu), r.gpus])).toEqual(Array.from({ length: 6 }, (_, i) => [`r-${i}`, 2000, [0, 1]]));
    const full = await replicas[0].reserveMany(versionId, REQUEST, 1, 'race');
    expect(full).toEqual({ placed: [], unplaced: 'not enough free GPUs: needs gpu H100, the most free is 0 (r-0)' });

    // Room freed behind the placers' backs (a plain UPDATE): the next batch of either sees it at once.
    await db.query(`UPDATE containers SET state = 'stopped' WHERE machine_id = 'r-3'`);
    const again = await replicas[1].reserveMany(versionId, REQUEST, 2, 'race');
    expect(again.placed.map((p) => [p.machineId, p.gpuIndexes])).toEqual([
      ['r-3', [0]],
      ['r-3', [1]],
    ]);
    expect((await held()).find((r) => r.machine_id === 'r-3')?.gpus).toEqual([0, 1]);
  });
});
