/**
 * Volumes: (1) first-mount throughput — a read-only volume of N MiB mounted by the first container
 * on a machine (the agent fetches every chunk straight from the registry, verifies it, caches it
 * and builds the tree), next to a bare parallel HTTP GET of the same blobs from the same registry
 * into files (the floor); (2) what a volume already cached on the machine adds to a container start.
 * Start latencies are the agent's own (`startupLatencyMs` of container.started: from the start
 * command's arrival to the process running). Prints the figures; not a test.
 *
 *   npm run build && node dist/bench/volumes/main.js [--mib 512] [--runs 7]
 *
 * Starts its own stack (as bench/invoke/e2e.ts) against NATS_URL and DATABASE_URL and removes it
 * afterwards. Needs root and runc.
 */
import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchArgs } from '../args.js';
import { connect } from '@nats-io/transport-node';
import { VOLUME_CHUNK_BYTES } from '#tern/contracts';
import { RegistryBlobs } from '#tern/volumes';
import { barePuts, chunkDigests, writeIntoCopy } from './commit.js';
import { bareGets, putRandomVolume, registryToken, registryUrl, volumeRepositoryOf } from './store.js';
import { api, deploy, type DeploymentView, openStack, quantile, sleep, until } from '../invoke/stack.js';

const values = benchArgs(`Usage: node dist/bench/volumes/main.js [--mib 512] [--runs 7]`, {
  mib: { type: 'string', default: '512' },
  runs: { type: 'string', default: '7' },
});
const MIB = Number(values.mib);
const RUNS = Number(values.runs);
const VOLUME = 'bench-models';
const PLAIN = 'bench-vol-plain';
const WRITER = 'bench-vol-rw';
const MOUNTED = 'bench-vol-ro';
const BODY = Buffer.from(JSON.stringify({ name: 'Ada' }));
/** Like bench/cold-start: one container at most, scaled to zero 2 s after its last request. */
const SHAPE = `workers: 1\ncpu: 0.5\nmemory: 256Mi\nkeep_warm_seconds: 2\nautoscaler:\n  type: queue_depth\n  max_containers: 1\n`;

const stack = await openStack({});
const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const nc = await connect({ servers: natsUrl, name: 'tern-bench-volumes' });
const work = await mkdtemp(join(tmpdir(), 'tern-bench-volumes-'));
/** container id → the agent's start latency (ms), from container.started. */
const started = new Map<string, number>();
nc.subscribe(`${stack.namespace}.container.*.started.v1`, {
  callback: (_e, m) => {
    const e = m.json<{ containerId: string; startupLatencyMs: number }>();
    started.set(e.containerId, e.startupLatencyMs);
  },
});

/** Waits until the deployment has scaled to zero, then starts one container with a request; its start latency. */
async function coldStart(name: string): Promise<number> {
  await until(
    `${name} at zero`,
    120_000,
    async () => {
      const v = await api<DeploymentView>(stack, 'GET', `/api/v1/deployments/${name}`);
      return v.actual === 0 && v.desired === 0 && v.containers.length === 0 ? v : undefined;
    },
    200,
  );
  await sleep(500); // let the stopped container's teardown settle
  const containerId = await request(name);
  return until(`container.started of ${containerId}`, 10_000, async () => started.get(containerId));
}

/** One request to the endpoint; the id of the container that answered. */
async function request(name: string): Promise<string> {
  // A first mount can take minutes: the gateway holds the request until the container is ready.
  const r = await fetch(`${stack.gateway}/endpoint/${name}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${stack.token}`, 'content-type': 'application/json' },
    body: BODY,
    signal: AbortSignal.timeout(600_000),
  });
  if (r.status !== 200) throw new Error(`${name}: request answered ${r.status}: ${await r.text()}`);
  await r.arrayBuffer();
  return r.headers.get('x-tern-container-id') ?? '';
}

/**
 * A commit of a new file of N MiB that a container wrote into its read-write mount of the volume
 * (`POST /api/v1/volumes/<name>/commit`: the agent reads, hashes and pushes its chunks, the
 * gateway checks them and commits), and its floor right before: the same chunks pushed with bare
 * uploads to a scratch repository of the same registry.
 */
async function commitFigures(): Promise<{ seconds: number; floor: { seconds: number; bytes: number } }> {
  const shape = SHAPE.replace('keep_warm_seconds: 2', 'keep_warm_seconds: 900');
  await deploy(stack, WRITER, `${shape}volumes:\n  - name: ${VOLUME}\n    path: /models\n    mode: rw\n`);
  const containerId = await request(WRITER);
  const path = await writeIntoCopy(stack.ternHome, containerId, VOLUME, 'commit.bin', MIB);
  const base = await registryUrl(stack);
  const scratch = `volumes/bench-floor/${randomBytes(4).toString('hex')}`;
  const token = await registryToken(stack, `repository:${scratch}:pull,push`);
  const floor = await barePuts(path, new RegistryBlobs(async () => ({ url: base, repository: scratch, token })), await chunkDigests(path));
  const t0 = performance.now();
  const answer = await api<{ containers: { outcome: string; reason?: string }[] }>(stack, 'POST', `/api/v1/volumes/${VOLUME}/commit`);
  const seconds = (performance.now() - t0) / 1000;
  if (!answer.containers.some((c) => c.outcome === 'committed')) throw new Error(`commit: ${JSON.stringify(answer)}`);
  return { seconds, floor };
}

const ms = (xs: number[]) =>
  `median ${quantile(xs, 0.5).toFixed(0)} ms (min ${Math.min(...xs).toFixed(0)}, max ${Math.max(...xs).toFixed(0)})`;

try {
  const digests = await putRandomVolume(stack, VOLUME, 'weights.bin', MIB);
  await deploy(stack, PLAIN, SHAPE);
  await deploy(stack, MOUNTED, `${SHAPE}volumes:\n  - name: ${VOLUME}\n    path: /models\n    mode: ro\n`);
  // Warm-up without the volume (untimed): the code bundle and the image are on the machine before the first mount.
  await coldStart(PLAIN);
  // The floor right before the first mount, so both see the same machine.
  const floor = await bareGets(
    stack,
    [{ repository: await volumeRepositoryOf(stack), digests, maxBytes: VOLUME_CHUNK_BYTES }],
    join(work, 'bare-copy'),
  );
  const firstMount = await coldStart(MOUNTED);
  const plain: number[] = [];
  const cached: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    // Interleaved so both see the same machine state.
    plain.push(await coldStart(PLAIN));
    cached.push(await coldStart(MOUNTED));
    console.error(`run ${i + 1}/${RUNS}: start without volume ${plain.at(-1)} ms, with the cached volume ${cached.at(-1)} ms`);
  }
  const commit = await commitFigures();
  const mountSeconds = (firstMount - quantile(plain, 0.5)) / 1000;
  const tern = MIB / mountSeconds;
  const bare = floor.bytes / 2 ** 20 / floor.seconds;
  console.log(
    `volumes: ${MIB} MiB read-only volume, ${RUNS} interleaved cold starts each (agent start latency: command → process running)`,
  );
  console.log(`start without a volume             ${ms(plain)}`);
  console.log(`start with the volume cached       ${ms(cached)}`);
  console.log(`cached volume adds (medians)       ${(quantile(cached, 0.5) - quantile(plain, 0.5)).toFixed(0)} ms`);
  console.log(
    `first mount                        ${firstMount} ms start, ${mountSeconds.toFixed(2)} s more than without: ${tern.toFixed(0)} MiB/s`,
  );
  console.log(
    `bare registry GETs (floor)         ${(floor.bytes / 2 ** 20).toFixed(0)} MiB in ${floor.seconds.toFixed(2)} s: ${bare.toFixed(0)} MiB/s`,
  );
  console.log(`ratio (first mount / floor)        ${(tern / bare).toFixed(2)}x`);
  const commitRate = MIB / commit.seconds;
  const putRate = commit.floor.bytes / 2 ** 20 / commit.floor.seconds;
  console.log(`commit                             ${MIB} MiB new file in ${commit.seconds.toFixed(2)} s: ${commitRate.toFixed(0)} MiB/s`);
  console.log(
    `bare registry PUTs (floor)         ${(commit.floor.bytes / 2 ** 20).toFixed(0)} MiB in ${commit.floor.seconds.toFixed(2)} s: ${putRate.toFixed(0)} MiB/s`,
  );
  console.log(`ratio (commit / floor)             ${(commitRate / putRate).toFixed(2)}x`);
} finally {
  for (const name of [PLAIN, MOUNTED, WRITER]) await api(stack, 'DELETE', `/api/v1/deployments/${name}`).catch(() => undefined);
  await nc.close();
  await rm(work, { recursive: true, force: true });
  await stack.stop();
}
