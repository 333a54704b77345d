/**
 * Model start: an endpoint whose image carries N MiB of library files and whose read-only volume
 * holds M MiB of weights (random bytes), its handler reading every weight in on_start, scaled
 * from zero on a machine with empty caches until its first response; then on a second machine
 * (its own agent and state dir on this host) while the first holds its caches. Each time is
 * printed beside the bytes the machine had to get divided by the floor rate (a bare parallel GET
 * of the same blobs from the same registry, measured in the same run), and the ratio. Not a test.
 *
 *   npm run build && node dist/bench/model-start/main.js [--weights-mib 4096] [--image-mib 1024] [--site-cache on|off] [--cache DIR]
 *
 * Starts its own stack (as bench/volumes) against NATS_URL and DATABASE_URL and removes it
 * afterwards, Ctrl-C included. Needs root, runc, umoci, skopeo, debootstrap and docker-registry.
 */
import 'reflect-metadata';
import { mkdtemp, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { Agent, fetch } from 'undici';
import { VOLUME_CHUNK_BYTES } from '#tern/contracts';
import { startSiteCache } from '#tern/volumes';
import { benchArgs } from '../args.js';
import { cpuSeconds, deploy, openStack } from '../invoke/stack.js';
import { bareGets, putRandomVolume, registryUrl, volumeRepositoryOf } from '../volumes/store.js';
import { cpuSplit } from './cpu.js';
import { LIBRARY_DIR, pushBenchImage } from './image.js';
import { type BenchMachine, joinMachine, lastStartPhases } from './machines.js';

const values = benchArgs(
  `Usage: node dist/bench/model-start/main.js [--weights-mib 4096] [--image-mib 1024] [--site-cache on|off] [--cache DIR] [--agent-cpu-prof DIR]`,
  {
    'weights-mib': { type: 'string', default: '4096' },
    'image-mib': { type: 'string', default: '1024' },
    'site-cache': { type: 'string', default: 'on' },
    cache: { type: 'string', default: join(tmpdir(), 'tern-test-image-cache') },
    'agent-cpu-prof': { type: 'string' },
  },
);
const WEIGHTS_MIB = Number(values['weights-mib']);
const IMAGE_MIB = Number(values['image-mib']);
if (!(WEIGHTS_MIB > 0) || !(IMAGE_MIB > 0)) {
  console.error('--weights-mib and --image-mib take a number of MiB above 0');
  process.exit(2);
}
if (values['site-cache'] !== 'on' && values['site-cache'] !== 'off') {
  console.error(`--site-cache takes on or off, not "${values['site-cache']}"`);
  process.exit(2);
}
const VOLUME = 'bench-weights';
/** As long as the request may take, in all: the gateway holds a first request up to `timeout` (1800 s). */
const REQUEST_LIMIT_MS = 1_900_000;
/**
 * The first request's connection: undici's defaults (300 s for the answer's headers, 300 s between
 * body bytes) would cut a cold start on a loaded host long before the request's own limit.
 */
const requests = new Agent({ headersTimeout: REQUEST_LIMIT_MS, bodyTimeout: REQUEST_LIMIT_MS });
const MiB = 2 ** 20;

/** The handler: reads every weight in on_start (as a model load does), answers what it read. */
const APP = `import os
import time

LOADED = {}


def load():
    began = time.monotonic()
    view = memoryview(bytearray(8 << 20))
    total = 0
    for root, _dirs, files in os.walk("/models"):
        for name in sorted(files):
            with open(os.path.join(root, name), "rb", buffering=0) as f:
                while True:
                    n = f.readinto(view)
                    if not n:
                        break
                    total += n
    LOADED["weights_bytes"] = total
    LOADED["read_seconds"] = time.monotonic() - began
    LOADED["library_bytes"] = sum(os.path.getsize(os.path.join("${LIBRARY_DIR}", n)) for n in os.listdir("${LIBRARY_DIR}"))


def predict(payload):
    return LOADED
`;

interface Loaded {
  weights_bytes: number;
  read_seconds: number;
  library_bytes: number;
}

// A first start of several GiB may pass the scheduler's default start limit (300 s) on a slow or busy machine.
const stack = await openStack({ env: { CONTAINER_START_LIMIT_SECONDS: '1800' } });
const work = await mkdtemp(join(tmpdir(), 'tern-bench-model-start-'));
stack.alsoStop(() => rm(work, { recursive: true, force: true }));
const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

/** How many layers of each compression the image has, e.g. `1 gzip + 8 zstd layers`. */
function layerKinds(layers: readonly { mediaType: string }[]): string {
  const counts = new Map<string, number>();
  for (const l of layers) {
    const kind = /\+(\w+)$/.exec(l.mediaType)?.[1] ?? (/gzip/.test(l.mediaType) ? 'gzip' : 'uncompressed');
    counts.set(kind, (counts.get(kind) ?? 0) + 1);
  }
  return `${[...counts].map(([kind, n]) => `${n} ${kind}`).join(' + ')} layers`;
}

/** One request to the deployment at zero, timed until its answer (200 required), with what on_start read. */
async function coldStart(name: string): Promise<{ seconds: number; loaded: Loaded }> {
  await execa('sync');
  const t0 = performance.now();
  const res = await fetch(`${stack.gateway}/endpoint/${name}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${stack.token}`, 'content-type': 'application/json' },
    body: '{}',
    signal: AbortSignal.timeout(REQUEST_LIMIT_MS),
    dispatcher: requests,
  });
  const text = await res.text();
  const seconds = (performance.now() - t0) / 1000;
  if (res.status !== 200) throw new Error(`${name}: the first request answered ${res.status}: ${text}`);
  const loaded = JSON.parse(text) as Loaded;
  if (loaded.weights_bytes !== WEIGHTS_MIB * MiB || loaded.library_bytes < IMAGE_MIB * MiB - 4096)
    throw new Error(`${name}: on_start read ${text}, not ${WEIGHTS_MIB} MiB of weights and ${IMAGE_MIB} MiB of libraries`);
  return { seconds, loaded };
}

try {
  const registry = await registryUrl(stack);
  const host = new URL(registry).host;
  console.error(`pushing the image (Tern's base + ${IMAGE_MIB} MiB of library files)`);
  const image = await pushBenchImage({ host, insecure: true, username: 'tern', password: stack.token }, IMAGE_MIB, values.cache!, work);
  console.error(`putting ${WEIGHTS_MIB} MiB of weights into volume ${VOLUME}`);
  const digests = await putRandomVolume(stack, VOLUME, 'weights.bin', WEIGHTS_MIB);
  const volumeRepository = await volumeRepositoryOf(stack);

  const site =
    values['site-cache'] === 'on'
      ? await startSiteCache(
          {
            upstream: registry,
            dir: join(work, 'site-cache'),
            maxBytes: 2 * WEIGHTS_MIB * MiB,
            failed: (message) => console.error(`site cache: ${message}`),
          },
          0,
          '127.0.0.1',
        )
      : undefined;
  if (site) stack.alsoStop(() => site.close());
  const machines: { machine: BenchMachine; deployment: string }[] = [];
  for (const which of ['first', 'second']) {
    const machine = await joinMachine(stack, `model-${which}`, `model-${which}`, site?.url, values['agent-cpu-prof']);
    const deployment = `bench-model-${which}`;
    await deploy(
      stack,
      deployment,
      `image: ${image.ref}\non_start: app.py:load\npool: ${machine.pool}\nworkers: 1\ncpu: 1\nmemory: 1Gi\nkeep_warm_seconds: 900\n` +
        // The gateway holds the first request as long as `timeout`; on_start may take `startup_timeout`.
        `timeout: 1800\nstartup_timeout: 1800\n` +
        `placement:\n  verified: false\nvolumes:\n  - name: ${VOLUME}\n    path: /models\n    mode: ro\n` +
        `autoscaler:\n  type: queue_depth\n  max_containers: 1\n`,
      'endpoint',
      APP,
    );
    machines.push({ machine, deployment });
  }

  // The floor right before the first start, so both see the same machine: every blob the
  // machine needs (the image's layers and the volume's chunks), bare GETs, 16 at once.
  const imageBytes = image.layers.reduce((n, l) => n + l.size, 0);
  const floor = await bareGets(
    stack,
    [
      { repository: image.repository, digests: image.layers.map((l) => l.hex), maxBytes: Math.max(...image.layers.map((l) => l.size)) },
      { repository: volumeRepository, digests, maxBytes: VOLUME_CHUNK_BYTES },
    ],
    join(work, 'floor'),
  );
  await rm(join(work, 'floor'), { recursive: true, force: true });
  const floorRate = floor.bytes / floor.seconds;
  console.error(`floor: ${(floor.bytes / MiB).toFixed(0)} MiB in ${floor.seconds.toFixed(2)} s; load average ${load()}`);

  const rows: string[] = [];
  let uplinkBefore = 0;
  for (const { machine, deployment } of machines) {
    const cpuBefore = { agent: await cpuSplit(machine.agentPid), bench: await cpuSeconds() };
    const { seconds, loaded } = await coldStart(deployment);
    // CPU moves much less than the wall clock with what else the machine runs: the agent with its
    // tar and zstd, and this process (the site cache, and the request itself).
    const split = await cpuSplit(machine.agentPid);
    const [main, threads, children] = (['main', 'threads', 'children'] as const).map((k) => split[k] - cpuBefore.agent[k]) as [
      number,
      number,
      number,
    ];
    const agentCpu = main + threads + children;
    const phases = await lastStartPhases(machine);
    const benchCpu = (await cpuSeconds()) - cpuBefore.bench;
    const bytes = imageBytes + WEIGHTS_MIB * MiB;
    const atFloor = bytes / floorRate;
    const uplink = site ? site.cache.stats.upstreamBytes - uplinkBefore : undefined;
    uplinkBefore = site?.cache.stats.upstreamBytes ?? 0;
    rows.push(
      `${machine.id.padEnd(13)} ${seconds.toFixed(2).padStart(8)} s   ${(bytes / MiB).toFixed(0).padStart(6)} MiB / ${(floorRate / MiB).toFixed(0)} MiB/s = ` +
        `${atFloor.toFixed(2)} s   ratio ${(seconds / atFloor).toFixed(2)}x   (CPU: agent ${agentCpu.toFixed(2)} s = ` +
        `main thread ${main.toFixed(2)} + other threads ${threads.toFixed(2)} + children ${children.toFixed(2)}, ` +
        `${site ? 'site cache and ' : ''}bench ${benchCpu.toFixed(2)} s; on_start read the weights in ${loaded.read_seconds.toFixed(2)} s` +
        `${uplink === undefined ? '' : `; the site cache fetched ${(uplink / MiB).toFixed(0)} MiB from the registry for it`}` +
        `${phases ? `; the agent: ${phases} after the start command` : ''})`,
    );
    console.error(`${rows.at(-1)}; load average ${load()}`);
  }

  console.log(
    `model start: image ${(imageBytes / MiB).toFixed(0)} MiB in the registry (${layerKinds(image.layers)}: Tern's base + ` +
      `${IMAGE_MIB} MiB of library files), read-only volume of ${WEIGHTS_MIB} MiB of weights read whole in on_start; ` +
      `${site ? `both machines read the registry's blobs through one site cache (${site.url})` : 'no site cache'}`,
  );
  console.log(
    `floor: bare registry GETs of the same blobs, 16 at once: ${(floor.bytes / MiB).toFixed(0)} MiB in ${floor.seconds.toFixed(2)} s: ` +
      `${(floorRate / MiB).toFixed(0)} MiB/s`,
  );
  console.log(`machine       scale from zero to first response   bytes moved / floor rate   ratio (goal for the first: <= 2x)`);
  for (const row of rows) console.log(row);
  console.log(`load average at the end: ${load()}`);
} finally {
  await stack.stop();
  await requests.close();
}
process.exit(0);
