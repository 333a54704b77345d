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
import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchArgs } from '../args.js';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { connect } from '@nats-io/transport-node';
import { REGISTRY_TOKEN_PATH, VOLUME_CHUNK_BYTES } from '#tern/contracts';
import { inParallel } from '#tern/volumes';
import { api, deploy, type DeploymentView, openStack, quantile, sleep, until } from '../invoke/stack.js';

const values = benchArgs(`Usage: node dist/bench/volumes/main.js [--mib 512] [--runs 7]`, {
  mib: { type: 'string', default: '512' },
  runs: { type: 'string', default: '7' },
});
const MIB = Number(values.mib);
const RUNS = Number(values.runs);
const VOLUME = 'bench-models';
const PLAIN = 'bench-vol-plain';
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

/** The sha256 of each chunk of the volume's file, as the gateway cuts it (for the floor's GETs). */
const digests: string[] = [];

/** N MiB of random bytes, made as they are sent (no chunk repeats, so none dedups); records each chunk's digest. */
function randomStream(mib: number): ReadableStream<Uint8Array> {
  let sent = 0;
  const perChunk = VOLUME_CHUNK_BYTES / 2 ** 20;
  let hash = createHash('sha256');
  return new ReadableStream({
    pull(controller) {
      if (sent >= mib) {
        if (sent % perChunk) digests.push(hash.digest('hex'));
        return controller.close();
      }
      const piece = randomBytes(2 ** 20);
      hash.update(piece);
      if (++sent % perChunk === 0) {
        digests.push(hash.digest('hex'));
        hash = createHash('sha256');
      }
      controller.enqueue(piece);
    },
  });
}

async function putVolume(): Promise<void> {
  await api(stack, 'POST', '/api/v1/volumes', { name: VOLUME });
  const res = await fetch(`${stack.gateway}/api/v1/volumes/${VOLUME}/files?path=weights.bin`, {
    method: 'PUT',
    headers: {
      authorization: `Bearer ${stack.token}`,
      'content-type': 'application/octet-stream',
      'content-length': String(MIB * 2 ** 20),
    },
    body: randomStream(MIB),
    duplex: 'half',
  } as RequestInit);
  if (!res.ok) throw new Error(`put: ${res.status} ${await res.text()}`);
}

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
  // A first mount can take minutes: the gateway holds the request until the container is ready.
  const r = await fetch(`${stack.gateway}/endpoint/${name}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${stack.token}`, 'content-type': 'application/json' },
    body: BODY,
    signal: AbortSignal.timeout(600_000),
  });
  if (r.status !== 200) throw new Error(`${name}: cold request answered ${r.status}: ${await r.text()}`);
  await r.arrayBuffer();
  const containerId = r.headers.get('x-tern-container-id') ?? '';
  return until(`container.started of ${containerId}`, 10_000, async () => started.get(containerId));
}

/** A registry token of the stack's operator (its API token as the Basic-auth password) for `scope`. */
async function registryToken(scope: string): Promise<string> {
  const res = await fetch(`${stack.gateway}${REGISTRY_TOKEN_PATH}?service=tern-registry&scope=${encodeURIComponent(scope)}`, {
    headers: { authorization: `Basic ${Buffer.from(`bench:${stack.token}`).toString('base64')}` },
  });
  if (!res.ok) throw new Error(`registry token: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { token: string }).token;
}

/**
 * The floor: every blob of the volume fetched with bare HTTP GETs from the registry the agent
 * fetches from, as many at once as the agent fetches (16), each into its own file (fsynced): no
 * hashing, no cache, no tree. Seconds and bytes.
 */
async function bareCopy(): Promise<{ seconds: number; bytes: number }> {
  const catalogToken = await registryToken('registry:catalog:*');
  const base = await registryUrl();
  const catalog = (await (await fetch(`${base}/v2/_catalog?n=1000`, { headers: { authorization: `Bearer ${catalogToken}` } })).json()) as {
    repositories: string[];
  };
  const repository = catalog.repositories.find((r) => r.startsWith('volumes/'));
  if (!repository) throw new Error(`no volumes/ repository in the registry's catalog: ${catalog.repositories.join(', ')}`);
  const token = await registryToken(`repository:${repository}:pull`);
  const dir = join(work, 'bare-copy');
  await mkdir(dir);
  let bytes = 0;
  const t0 = performance.now();
  await inParallel(digests, 16, async (hex) => {
    const res = await fetch(`${base}/v2/${repository}/blobs/sha256:${hex}`, { headers: { authorization: `Bearer ${token}` } });
    if (!res.ok || !res.body) throw new Error(`GET blob ${hex}: ${res.status}`);
    const file = createWriteStream(join(dir, hex));
    await pipeline(Readable.fromWeb(res.body as WebReadableStream), file);
    bytes += file.bytesWritten;
  });
  return { seconds: (performance.now() - t0) / 1000, bytes };
}

/** The registry `npm run up` started for the stack (run.json), or BENCH_REGISTRY_URL for an existing stack's. */
async function registryUrl(): Promise<string> {
  if (process.env.BENCH_REGISTRY_URL) return process.env.BENCH_REGISTRY_URL.replace(/\/+$/, '');
  const run = JSON.parse(await readFile(join(stack.ternHome, 'run.json'), 'utf8')) as { registry?: { url?: string } };
  if (!run.registry?.url)
    throw new Error(`the stack runs no private registry (${join(stack.ternHome, 'run.json')}): set BENCH_REGISTRY_URL`);
  return run.registry.url.replace(/\/+$/, '');
}

const ms = (xs: number[]) =>
  `median ${quantile(xs, 0.5).toFixed(0)} ms (min ${Math.min(...xs).toFixed(0)}, max ${Math.max(...xs).toFixed(0)})`;

try {
  await putVolume();
  await deploy(stack, PLAIN, SHAPE);
  await deploy(stack, MOUNTED, `${SHAPE}volumes:\n  - name: ${VOLUME}\n    path: /models\n    mode: ro\n`);
  // Warm-up without the volume (untimed): the code bundle and the image are on the machine before the first mount.
  await coldStart(PLAIN);
  // The floor right before the first mount, so both see the same machine.
  const floor = await bareCopy();
  const firstMount = await coldStart(MOUNTED);
  const plain: number[] = [];
  const cached: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    // Interleaved so both see the same machine state.
    plain.push(await coldStart(PLAIN));
    cached.push(await coldStart(MOUNTED));
    console.error(`run ${i + 1}/${RUNS}: start without volume ${plain.at(-1)} ms, with the cached volume ${cached.at(-1)} ms`);
  }
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
} finally {
  for (const name of [PLAIN, MOUNTED]) await api(stack, 'DELETE', `/api/v1/deployments/${name}`).catch(() => undefined);
  await nc.close();
  await rm(work, { recursive: true, force: true });
  await stack.stop();
}
