/**
 * Images: (1) first pull + unpack of a registry image onto an empty cache through the agent's
 * ImageStore, next to the floor — downloading its blobs alone (every layer GET, six at once,
 * through a sha256, nothing written) — and to what agents did before (`skopeo copy` + `umoci raw
 * unpack` by hand);
 * (2) cold start of a Python server on that image, cached, until GET /health answers, next to a
 * bare `runc run --detach` of the same config.json (as bench/container-start). Prints figures;
 * not a test.
 *
 *   npm run build && node dist/bench/images/main.js [--pulls 3] [--starts 10] [--extra-mb 200] [--compress zstd] [--cache DIR]
 *
 * Needs root, runc, umoci, skopeo, debootstrap, docker-registry and htpasswd. Starts its own
 * registry (scripts/lib/registry.mjs); the base (minbase + python3) is debootstrapped once into
 * --cache; --extra-mb adds a layer of incompressible bytes (700 makes it pass 1 GB); --compress is
 * how its layers are pushed (zstd: as builds push them; gzip: as most registries' images are).
 */
import { createHash, randomBytes } from 'node:crypto';
import { get } from 'node:http';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchArgs } from '../args.js';
import { execa } from 'execa';
import { buildBaseImage, freePort, ImageStore, type OciSpec, RuncRuntime, skopeoCopy, waitForHealth } from '#tern/runtime';
import { bareRuncStart, SERVERS } from '../container-start/bare-runc.js';
import { cpuSeconds, quantile } from '../invoke/stack.js';

const values = benchArgs(
  `Usage: node dist/bench/images/main.js [--pulls 3] [--starts 10] [--extra-mb 200] [--compress zstd] [--cache DIR]`,
  {
    pulls: { type: 'string', default: '3' },
    compress: { type: 'string', default: 'zstd' },
    starts: { type: 'string', default: '10' },
    'extra-mb': { type: 'string', default: '200' },
    cache: { type: 'string', default: join(tmpdir(), 'tern-test-image-cache') },
  },
);
const pulls = Number(values.pulls);
const starts = Number(values.starts);
const extraMb = Number(values['extra-mb']);
const compress = values.compress === 'gzip' ? 'gzip' : 'zstd';

const SERVER = SERVERS.python!;

const dir = await mkdtemp(join(tmpdir(), 'tern-bench-images-'));
const port = await freePort();
const registryProc = execa('node', ['scripts/lib/registry.mjs', join(dir, 'registry'), String(port)], { reject: false });
const host = `127.0.0.1:${port}`;
const id = (kind: string) => `bench-${kind}-${randomBytes(3).toString('hex')}`;

const row = (name: string, xs: number[], unit = 1) =>
  `${name.padEnd(34)}${[quantile(xs, 0.5), Math.min(...xs), Math.max(...xs)].map((v) => (v / unit).toFixed(1).padStart(9)).join('')}`;

interface Layer {
  digest: string;
  size: number;
}

/** The floor: every layer's blob downloaded (six at once, as the agent does) through a sha256, kept nowhere. */
async function downloadBlobs(repo: string, layers: Layer[], creds: { username: string; password: string }): Promise<void> {
  const authorization = `Basic ${Buffer.from(`${creds.username}:${creds.password}`).toString('base64')}`;
  const one = (l: Layer) =>
    new Promise<void>((resolve, reject) => {
      get(`http://${host}/v2/${repo}/blobs/${l.digest}`, { headers: { authorization } }, (res) => {
        if (res.statusCode !== 200) return reject(new Error(`${res.statusCode} for ${l.digest}`));
        const hash = createHash('sha256');
        res.on('data', (c: Buffer) => hash.update(c));
        res.on('end', () => (`sha256:${hash.digest('hex')}` === l.digest ? resolve() : reject(new Error(`digest of ${l.digest}`))));
        res.on('error', reject);
      }).on('error', reject);
    });
  let next = 0;
  const worker = async () => {
    while (next < layers.length) await one(layers[next++]!);
  };
  await Promise.all(Array.from({ length: 6 }, worker));
}

/** What agents did before: `skopeo copy` into a layout, then `umoci raw unpack`; its time in ms. */
async function skopeoUmoci(ref: string, hand: string, creds: { username: string; password: string }): Promise<number> {
  await mkdir(hand);
  const t0 = performance.now();
  await execa('skopeo', [
    'copy',
    '--src-tls-verify=false',
    '--src-creds',
    `${creds.username}:${creds.password}`,
    `docker://${ref}`,
    `oci:${hand}/layout:x`,
  ]);
  await execa('umoci', ['raw', 'unpack', '--image', `${hand}/layout:x`, `${hand}/rootfs`]);
  const ms = performance.now() - t0;
  await rm(hand, { recursive: true, force: true });
  return ms;
}

/** Pushes base (+ a layer of random bytes) and returns the pinned reference, its layers and their size in the registry. */
async function pushBenchImage(access: {
  host: string;
  insecure: boolean;
  username: string;
  password: string;
}): Promise<{ ref: string; bytes: number; layers: Layer[] }> {
  const base = `${host}/tern/base:bench`;
  await buildBaseImage(base, [access], { cacheDir: values.cache!, include: ['python3'] });
  const layout = join(dir, 'build-layout');
  await skopeoCopy(base, `docker://${base}`, `oci:${layout}:big`, [access]);
  if (extraMb > 0) {
    const fill = join(dir, 'fill');
    await mkdir(fill);
    await writeFile(join(fill, 'blob'), randomBytes(extraMb * 1024 * 1024));
    await execa('umoci', ['insert', '--image', `${layout}:big`, fill, '/opt/bench-fill']);
  }
  const digest = await skopeoCopy(base, `oci:${layout}:big`, `docker://${host}/tern/bench:big`, [access], { compress });
  const manifest = JSON.parse(
    (
      await execa('skopeo', [
        'inspect',
        '--raw',
        '--tls-verify=false',
        '--creds',
        `${access.username}:${access.password}`,
        `docker://${host}/tern/bench@${digest}`,
      ])
    ).stdout,
  ) as {
    layers: Layer[];
  };
  return { ref: `${host}/tern/bench@${digest}`, bytes: manifest.layers.reduce((n, l) => n + l.size, 0), layers: manifest.layers };
}

try {
  for (let i = 0; ; i++) {
    if ((await fetch(`http://${host}/v2/`).catch(() => undefined))?.status === 401) break;
    if (i > 300) throw new Error('the registry did not start');
    await new Promise((r) => setTimeout(r, 100));
  }
  const creds = JSON.parse(await readFile(join(dir, 'registry', 'credentials.json'), 'utf8')) as Record<
    string,
    { username: string; password: string }
  >;
  const builder = { host, insecure: true, ...creds.builder! };
  const puller = { host, insecure: true, ...creds.puller! };
  const image = await pushBenchImage(builder);
  console.log(`image ${image.ref}: ${(image.bytes / 1e6).toFixed(0)} MB in ${image.layers.length} ${compress} layers in the registry`);
  console.log(
    `load average at the start: ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );

  // (1) first pull + unpack onto an empty cache, interleaved with the floor and the old path.
  const tern: number[] = [];
  const floor: number[] = [];
  const old: number[] = [];
  for (let i = 0; i < pulls; i++) {
    // Each run starts with no dirty pages of the one before it to write back.
    await execa('sync');
    let c0 = await cpuSeconds();
    let t0 = performance.now();
    await downloadBlobs('tern/bench', image.layers, puller);
    floor.push(performance.now() - t0);
    const floorCpu = (await cpuSeconds()) - c0;

    const root = join(dir, `store-${i}`);
    await execa('sync');
    const layersAt: string[] = [];
    c0 = await cpuSeconds();
    t0 = performance.now();
    const onPullProgress = (_ref: string, line: string) => {
      if (line.startsWith('Copying blob')) layersAt.push(((performance.now() - t0) / 1000).toFixed(1));
    };
    await new ImageStore({ root, registries: [puller], onPullProgress }).resolve(image.ref);
    tern.push(performance.now() - t0);
    const ternCpu = (await cpuSeconds()) - c0;
    console.log(
      `run ${i + 1}: floor ${(floor.at(-1)! / 1000).toFixed(1)} s (${floorCpu.toFixed(1)} CPU s), ` +
        `tern ${(tern.at(-1)! / 1000).toFixed(1)} s (${ternCpu.toFixed(1)} CPU s; layers unpacked at ${layersAt.join(', ')} s)`,
    );
    await rm(root, { recursive: true, force: true });

    // umoci 0.4 reads no zstd: the old path only for gzip layers.
    if (compress === 'gzip') old.push(await skopeoUmoci(image.ref, join(dir, `hand-${i}`), puller));
  }
  console.log(`\nfirst pull + unpack onto an empty cache, ${pulls} runs each, interleaved`);
  console.log(`${''.padEnd(34)}${['median', 'min', 'max'].map((h) => h.padStart(9)).join('')}   (s)`);
  console.log(row('tern ImageStore.resolve', tern, 1000));
  console.log(row('download the blobs alone (floor)', floor, 1000));
  if (old.length) console.log(row('skopeo copy + umoci unpack (old)', old, 1000));
  const mbs = (xs: number[]) => `${(image.bytes / 1e6 / (quantile(xs, 0.5) / 1000)).toFixed(0)} MB/s`;
  console.log(`throughput (median): tern ${mbs(tern)}, floor ${mbs(floor)}${old.length ? `, old ${mbs(old)}` : ''}`);
  console.log(
    `tern / floor speed (median floor time / median tern time, goal >= 0.6): ${(quantile(floor, 0.5) / quantile(tern, 0.5)).toFixed(2)}x`,
  );
  console.log(
    `load average at the end: ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );

  // (2) cold start with the image cached.
  const images = new ImageStore({ root: join(dir, 'images'), registries: [puller] });
  const runtime = new RuncRuntime({ stateDir: join(dir, 'state'), images });
  const bareRoot = join(dir, 'bare-runc');
  const viaRuntime = async (): Promise<{ ms: number; config: OciSpec }> => {
    const cid = id('tern');
    const t0 = performance.now();
    try {
      const c = await runtime.start({ id: cid, image: image.ref, args: SERVER });
      await waitForHealth({ port: c.port!, timeoutMs: 30_000, interval: { firstMs: 2, maxMs: 2 } });
      const ms = performance.now() - t0;
      return { ms, config: JSON.parse(await readFile(join(runtime.bundle(cid).dir, 'config.json'), 'utf8')) as OciSpec };
    } finally {
      await runtime.remove(cid);
    }
  };
  const bare = (template: OciSpec): Promise<number> => bareRuncStart(template, dir, bareRoot);
  try {
    const { config } = await viaRuntime(); // warm-up: pulls and unpacks, untimed
    await bare(config);
    const t: number[] = [];
    const b: number[] = [];
    for (let i = 0; i < starts; i++) {
      t.push((await viaRuntime()).ms);
      b.push(await bare(config));
    }
    console.log(`\ncold start of a Python server on the image (cached) until GET /health answers, ${starts} runs each, interleaved`);
    console.log(`${''.padEnd(34)}${['median', 'min', 'max'].map((h) => h.padStart(9)).join('')}   (ms)`);
    console.log(row('tern runtime start()', t));
    console.log(row('bare runc run --detach', b));
    console.log(`ratio (median tern / bare): ${(quantile(t, 0.5) / quantile(b, 0.5)).toFixed(2)}x`);
  } finally {
    for (const c of await runtime.list()) await runtime.remove(c.id);
  }
} finally {
  registryProc.kill('SIGTERM');
  await registryProc;
  await rm(dir, { recursive: true, force: true });
}
