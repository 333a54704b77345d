/**
 * Container start latency: how long the runtime takes from start() until the container's
 * health endpoint answers, next to a bare `runc run --detach` of the same config.json in the
 * same run. Prints figures; not a test.
 *
 *   npm run build && node dist/bench/container-start/main.js [--runs 15] [--server node|python]
 *
 * Needs root and runc (the runtime's own requirements).
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchArgs } from '../args.js';
import { ImageStore, type OciSpec, RuncRuntime, waitForHealth } from '#tern/runtime';
import { bareRuncStart, SERVERS } from './bare-runc.js';

const values = benchArgs(`Usage: node dist/bench/container-start/main.js [--runs 15] [--server node|python]`, {
  runs: { type: 'string', default: '15' },
  server: { type: 'string', default: 'node' },
});
const runs = Number(values.runs);
const server = SERVERS[values.server ?? 'node'];
if (!server || !(runs > 0)) {
  console.error('usage: main.js [--runs N] [--server node|python]');
  process.exit(2);
}

const dir = await mkdtemp(join(tmpdir(), 'tern-bench-start-'));
const images = new ImageStore({ root: join(dir, 'images') });
const runtime = new RuncRuntime({ stateDir: join(dir, 'state'), images });
const bareRoot = join(dir, 'bare-runc');
const id = (kind: string) => `bench-${kind}-${randomBytes(3).toString('hex')}`;

/** One start through the runtime; returns ms to healthy, and the config.json it wrote. */
async function viaRuntime(): Promise<{ ms: number; config: OciSpec }> {
  const cid = id('tern');
  const t0 = performance.now();
  try {
    const c = await runtime.start({ id: cid, image: 'host', args: server! });
    await waitForHealth({ port: c.port!, timeoutMs: 30_000, interval: { firstMs: 2, maxMs: 2 } });
    const ms = performance.now() - t0;
    const config = JSON.parse(await readFile(join(runtime.bundle(cid).dir, 'config.json'), 'utf8')) as OciSpec;
    return { ms, config };
  } finally {
    await runtime.remove(cid);
  }
}

/** The same config.json (own port and cgroup), started by `runc run --detach` directly. */
const bareRunc = (template: OciSpec): Promise<number> => bareRuncStart(template, dir, bareRoot);

const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  const pos = (s.length - 1) * q;
  const lo = Math.floor(pos);
  return s[lo]! + (s[Math.ceil(pos)]! - s[lo]!) * (pos - lo);
};

try {
  // Warm-up, untimed: builds the host image, fills the page cache.
  const { config } = await viaRuntime();
  await bareRunc(config);
  const tern: number[] = [];
  const bare: number[] = [];
  for (let i = 0; i < runs; i++) {
    // Interleaved so both see the same machine state.
    tern.push((await viaRuntime()).ms);
    bare.push(await bareRunc(config));
  }
  const row = (name: string, xs: number[]) =>
    `${name.padEnd(26)}${[0.5, 0.9].map((q) => quantile(xs, q).toFixed(1).padStart(9)).join('')}${Math.min(...xs)
      .toFixed(1)
      .padStart(9)}${Math.max(...xs)
      .toFixed(1)
      .padStart(9)}`;
  console.log(`container start until GET /health answers (${values.server} server on $PORT, host image), ${runs} runs each, interleaved`);
  console.log(`${''.padEnd(26)}${['median', 'p90', 'min', 'max'].map((h) => h.padStart(9)).join('')}   (ms)`);
  console.log(row('tern runtime start()', tern));
  console.log(row('bare runc run --detach', bare));
  console.log(`ratio (median tern / bare): ${(quantile(tern, 0.5) / quantile(bare, 0.5)).toFixed(2)}x`);
} finally {
  for (const c of await runtime.list()) await runtime.remove(c.id);
  await rm(dir, { recursive: true, force: true });
}
