import { randomBytes } from 'node:crypto';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { freePort, type OciSpec, waitForHealth } from '#tern/runtime';

/** A server answering GET /health on $PORT, per language: what the start benches time until it answers. */
export const SERVERS: Record<string, string[]> = {
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

/**
 * The floor of a container start: `template` (a config.json the runtime wrote) with its own port
 * and cgroup, started by `runc run --detach` directly under `root`, timed until GET /health
 * answers. The bundle lives under `dir` and is removed after.
 */
export async function bareRuncStart(template: OciSpec, dir: string, root: string): Promise<number> {
  const cid = `bench-bare-${randomBytes(3).toString('hex')}`;
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
    await execa('runc', ['--root', root, 'run', '--detach', '--bundle', bundle, cid], { stdio: 'ignore' });
    await waitForHealth({ port, timeoutMs: 30_000, interval: { firstMs: 2, maxMs: 2 } });
    return performance.now() - t0;
  } finally {
    await execa('runc', ['--root', root, 'delete', '--force', cid], { reject: false });
    await rm(bundle, { recursive: true, force: true });
  }
}
