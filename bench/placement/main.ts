/**
 * Placement at scale: placements per second of
 *   1. place() one call per container (what each placement cost before batches), and placeMany()
 *      in batches (what the scheduler runs now), in-process, at 1,000 and 10,000 machines of 8 GPUs,
 *      one 1-GPU container per placement, the machines' usage updated after each;
 *   2. the scheduler's reservation path (Placer.reserveMany: the pool's in-memory index refreshed
 *      from machine generations, placeMany, the chosen machines locked and their generations
 *      checked, one INSERT) on Postgres, two replicas (two connections pools) reserving into one
 *      pool of --machines machines that already hold --held containers, then a check that no
 *      machine is overbooked (CPU, memory, or a GPU index given twice).
 * Prints a table with the goals of issue 19 as ratios. Not a test.
 *
 *   npm run build && node dist/bench/placement/main.js [--database postgres://postgres@127.0.0.1:5432/postgres]
 *       [--machines 10000] [--held 50000] [--containers 4000] [--batch 100] [--skip-in-process]
 *
 * It makes its own schema in --database and drops it afterwards.
 */
import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import { benchArgs } from '../args.js';
import pg from 'pg';
import { ContainersRepository, createDataSource, ReputationRepository, runMigrations } from '#tern/persistence';
import { isPlaced, type MachineView, place, placeMany, type PlacementRequest, withContainer } from '#tern/placement';
import { Placer } from '../../apps/scheduler/src/placement/placer.js';
import type { ReputationScores } from '../../apps/scheduler/src/placement/reputation-scores.js';

const values = benchArgs(
  `Usage: node dist/bench/placement/main.js [--database postgres://postgres@127.0.0.1:5432/postgres]
    [--machines 10000] [--held 50000] [--containers 4000] [--batch 100] [--skip-in-process]`,
  {
    database: { type: 'string', default: process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres' },
    machines: { type: 'string', default: '10000' },
    held: { type: 'string', default: '50000' },
    containers: { type: 'string', default: '4000' },
    batch: { type: 'string', default: '100' },
    'skip-in-process': { type: 'boolean', default: false },
  },
);
const GiB = 2 ** 30;
const GPUS_PER_MACHINE = 8;
const MODELS = ['NVIDIA H100 80GB HBM3', 'NVIDIA A100-SXM4-80GB'];
const REQUEST: PlacementRequest = { cpuMillicores: 2000, memoryBytes: 8 * GiB, gpuTypes: ['H100', 'A100'], gpuCount: 1, pool: 'default' };

/** `count` machines of 8 GPUs (one model each), 64 cores and 1 TiB, empty. */
function fleet(count: number): MachineView[] {
  return Array.from({ length: count }, (_, i) => ({
    id: `m-${String(i).padStart(6, '0')}`,
    pool: 'default',
    state: 'ready',
    capacity: {
      cpuMillicores: 64_000,
      memoryBytes: 1024 * GiB,
      gpus: Array.from({ length: GPUS_PER_MACHINE }, (_, index) => ({ index, model: MODELS[i % MODELS.length] })),
    },
    used: { cpuMillicores: 0, memoryBytes: 0, gpuIndexes: [] },
  }));
}

/** place() one container at a time for `seconds`, the chosen machine's usage added after each. */
function onePerCall(machines: MachineView[], seconds: number): number {
  const now = [...machines];
  const index = new Map(now.map((m, i) => [m.id, i]));
  const started = performance.now();
  let placed = 0;
  while (performance.now() - started < seconds * 1000) {
    const result = place(REQUEST, now);
    if (!isPlaced(result)) break;
    const i = index.get(result.machineId)!;
    now[i] = withContainer(now[i], REQUEST, result.gpuIndexes);
    placed++;
  }
  return placed / ((performance.now() - started) / 1000);
}

/** placeMany() in batches of `batch` until `total` containers are placed. */
function batched(machines: MachineView[], total: number, batch: number): number {
  let now = machines;
  const started = performance.now();
  for (let done = 0; done < total; done += batch) {
    const step = placeMany(Array<PlacementRequest>(Math.min(batch, total - done)).fill(REQUEST), now);
    if (!step.results.every(isPlaced)) throw new Error('the fleet ran out of room: ask for fewer containers');
    now = step.machines;
  }
  return total / ((performance.now() - started) / 1000);
}

async function inProcess(): Promise<string[][]> {
  const rows: string[][] = [];
  for (const size of [1_000, 10_000]) {
    const machines = fleet(size);
    onePerCall(machines, 0.5); // warm-up
    const perCall = onePerCall(machines, 3);
    batched(machines, 2_000, 512); // warm-up
    const many = batched(machines, size * 6, 512); // the fleet's GPUs three quarters taken by the end
    rows.push([`place() per call, ${size} machines`, rate(perCall), ratio(perCall, 20_000)]);
    rows.push([`placeMany() batches of 512, ${size} machines`, rate(many), ratio(many, 20_000)]);
  }
  return rows;
}

/** A schema with one pool of `machines` machines already holding `held` 1-GPU containers. */
async function seed(url: string, schema: string, machines: number, held: number): Promise<string> {
  const db = await createDataSource({ url, schema, runMigrations: true }).initialize();
  await runMigrations(db);
  await db.destroy();
  const client = new pg.Client({ connectionString: url, options: `-c search_path="${schema}"` });
  await client.connect();
  try {
    const gpus = (i: string) =>
      `(SELECT jsonb_agg(jsonb_build_object('index', g, 'model', CASE WHEN ${i} % 2 = 0 THEN '${MODELS[0]}' ELSE '${MODELS[1]}' END, 'memoryBytes', ${80 * GiB}::bigint)) FROM generate_series(0, ${GPUS_PER_MACHINE - 1}) g)`;
    await client.query(`INSERT INTO pools (name) VALUES ('default') ON CONFLICT DO NOTHING`);
    await client.query(
      `INSERT INTO machines (id, pool, state, cpu_threads, memory_bytes, gpus, last_heartbeat_at)
       SELECT 'm-' || lpad(i::text, 6, '0'), 'default', 'ready', 64, ${1024 * GiB}::bigint, ${gpus('i')}, now() + interval '1 hour'
       FROM generate_series(0, $1 - 1) i`,
      [machines],
    );
    const workspace = (await client.query(`INSERT INTO workspaces (name) VALUES ('bench') RETURNING id`)).rows[0].id;
    const deployment = (
      await client.query(
        `INSERT INTO deployments (workspace_id, name, kind, state, latest_version) VALUES ($1, 'bench', 'endpoint', 'ready', 1) RETURNING id`,
        [workspace],
      )
    ).rows[0].id;
    const version = (
      await client.query(`INSERT INTO deployment_versions (deployment_id, version, spec) VALUES ($1, 1, '{}'::jsonb) RETURNING id`, [
        deployment,
      ])
    ).rows[0].id as string;
    // Held containers spread evenly: container k on machine k mod machines, GPU index k div machines.
    await client.query(
      `INSERT INTO containers (id, deployment_version_id, machine_id, state, state_reason, requested)
       SELECT 'c-held-' || k, $1, 'm-' || lpad((k % $2)::text, 6, '0'), 'running', 'seed',
              jsonb_build_object('cpuMillicores', 2000, 'memoryBytes', ${8 * GiB}::bigint, 'gpuCount', 1, 'gpuIndexes', jsonb_build_array(k / $2))
       FROM generate_series(0, $3 - 1) k`,
      [version, machines, held],
    );
    await client.query(`ANALYZE`);
    return version;
  } finally {
    await client.end();
  }
}

/** Machines given more than they have, after the run (0 is the only right answer). */
async function overbooked(url: string, schema: string): Promise<number> {
  const client = new pg.Client({ connectionString: url, options: `-c search_path="${schema}"` });
  await client.connect();
  try {
    const { rows } = await client.query(
      `WITH held AS (
         SELECT machine_id, sum((requested->>'cpuMillicores')::bigint) AS cpu,
                count(g) - count(DISTINCT g) AS doubled, count(g) AS gpus
         FROM containers LEFT JOIN LATERAL jsonb_array_elements_text(requested->'gpuIndexes') g ON true
         WHERE state IN ('scheduled', 'starting', 'running') GROUP BY machine_id)
       SELECT count(*)::int AS n FROM held JOIN machines m ON m.id = held.machine_id
       WHERE held.cpu > m.cpu_threads * 1000 OR held.doubled > 0 OR held.gpus > jsonb_array_length(m.gpus)`,
    );
    return rows[0].n;
  } finally {
    await client.end();
  }
}

async function throughScheduler(url: string, machines: number, held: number, containers: number, batch: number): Promise<string[][]> {
  const schema = `bench_placement_${randomUUID().slice(0, 8)}`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`CREATE SCHEMA "${schema}"`);
  try {
    const version = await seed(url, schema, machines, held);
    // Two replicas: each its own connection pool and Placer, as two scheduler processes.
    const replicas = await Promise.all(
      [0, 1].map(async () => {
        const db = await createDataSource({ url, schema, runMigrations: false }).initialize();
        // An empty reputation mirror: the placer reads the stored scores, as a scheduler does before the bucket answers.
        const mirror = { scores: () => undefined } as unknown as ReputationScores;
        return { db, placer: new Placer(new ContainersRepository(db), new ReputationRepository(db), mirror) };
      }),
    );
    try {
      // One batch each first: a scheduler reads the whole pool once when it starts (its in-memory
      // index), then only what changed; the steady state is what is timed, the first read printed apart.
      const loading = performance.now();
      await Promise.all(replicas.map(({ placer }) => placer.reserveMany(version, REQUEST, batch, 'bench')));
      const firstBatch = performance.now() - loading;
      const started = performance.now();
      await Promise.all(
        replicas.map(async ({ placer }) => {
          for (let done = 0; done < containers / 2; done += batch) {
            const r = await placer.reserveMany(version, REQUEST, batch, 'bench');
            if (r.unplaced) throw new Error(`the pool ran out of room: ${r.unplaced}`);
          }
        }),
      );
      const perSecond = containers / ((performance.now() - started) / 1000);
      const bad = await overbooked(url, schema);
      return [
        [
          `scheduler reserveMany, 2 replicas, batches of ${batch}, ${machines} machines holding ${held}`,
          rate(perSecond),
          ratio(perSecond, 1_000),
        ],
        [`first batch of each replica (reads the pool), not counted above`, `${Math.round(firstBatch)} ms`, ''],
        ['machines overbooked afterwards', String(bad), bad === 0 ? 'ok' : 'OVERBOOKED'],
      ];
    } finally {
      for (const r of replicas) await r.db.destroy();
    }
  } finally {
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  }
}

function rate(perSecond: number): string {
  return `${Math.round(perSecond).toLocaleString('en-US')}/s`;
}

function ratio(perSecond: number, goal: number): string {
  return `×${(perSecond / goal).toFixed(2)} of ${goal.toLocaleString('en-US')}/s`;
}

function print(rows: string[][]): void {
  const widths = [0, 1, 2].map((c) => Math.max(...rows.map((r) => r[c].length)));
  for (const r of rows) console.log(r.map((cell, c) => cell.padEnd(widths[c])).join('  '));
}

const rows = [['path', 'placements', 'vs goal'], ...(values['skip-in-process'] ? [] : await inProcess())];
print(rows);
console.log();
print([
  ['path', 'containers', 'vs goal'],
  ...(await throughScheduler(
    values.database!,
    Number(values.machines),
    Number(values.held),
    Number(values.containers),
    Number(values.batch),
  )),
]);
