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
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { execa } from 'execa';
import { freePort, ImageStore, type OciSpec, RuncRuntime, waitForHealth } from '#tern/runtime';

const SERVERS: Record<string, string[]> = {
  node: ['node', '-e', "require('http').createServer((q, s) => s.end('ok')).listen(+process.env.PORT, '127.0.0.1')"],
  python: [
    'python3',
    '-c',
    [
      'import http.server, os',
      'class H(http.server.BaseHTTPRequestHandler):',
      '  def do_GET(self): self.send_response(200); self.end_headers(); self.wfile.write(b"ok")',
      '  def log_message(self, *a): pass',
      'http.server.HTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()',
    ].join('\n'),
  ],
};

const { values } = parseArgs({
  options: { runs: { type: 'string', default: '15' }, server: { type: 'string', default: 'node' } },
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
    await waitForHealth({ port: c.port!, timeoutMs: 30_000, intervalMs: 2 });
    const ms = performance.now() - t0;
    const config = JSON.parse(await readFile(join(runtime.bundle(cid).dir, 'config.json'), 'utf8')) as OciSpec;
    return { ms, config };
  } finally {
    await runtime.remove(cid);
  }
}

/** The same config.json (own port and cgroup), started by `runc run --detach` directly. */
async function bareRunc(template: OciSpec): Promise<number> {
  const cid = id('bare');
  const bundle = join(dir, 'bare', cid);
  const port = await freePort();
  const config: OciSpec = {
    ...template,
    process: { ...template.process, env: template.process.env.map((e) => (e.startsWith('PORT=') ? `PORT=${port}` : e)) },
    linux: { ...template.linux, cgroupsPath: `/tern/${cid}` },
  };
  await mkdir(bundle, { recursive: true });
  await writeFile(join(bundle, 'config.json'), JSON.stringify(config));
  const t0 = performance.now();
  try {
    await execa('runc', ['--root', bareRoot, 'run', '--detach', '--bundle', bundle, cid], { stdio: 'ignore' });
    await waitForHealth({ port, timeoutMs: 30_000, intervalMs: 2 });
    return performance.now() - t0;
  } finally {
    await execa('runc', ['--root', bareRoot, 'delete', '--force', cid], { reject: false });
    await rm(bundle, { recursive: true, force: true });
  }
}

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
