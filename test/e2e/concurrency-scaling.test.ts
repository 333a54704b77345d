import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startStack, type Stack } from '../support/stack.js';
import { waitFor } from '../support/processes.js';

let stack: Stack;

/** Autoscaling on in-flight requests per container (autoscaler type concurrency), through the whole stack. */
describe('concurrency autoscaling end to end', () => {
  const auth = () => ({ authorization: `Bearer ${stack.token}` });
  const call = (name: string, body: unknown) =>
    fetch(`${stack.gateway}/endpoint/${name}`, {
      method: 'POST',
      headers: { ...auth(), 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  beforeAll(async () => {
    stack = await startStack('concurrency');
  }, 120_000);

  afterAll(async () => {
    await stack?.stop();
  });

  it('runs 6 slow requests on 3 containers at target_concurrency 2, though one container holds 4', async () => {
    const dir = stack.scratch('paced');
    writeFileSync(join(dir, 'app.py'), 'import time\ndef predict(p):\n    time.sleep(p["seconds"])\n    return {"slept": p["seconds"]}\n');
    writeFileSync(
      join(dir, 'tern.yaml'),
      'name: paced\nkind: endpoint\nhandler: app.py:predict\ncpu: 0.25\nmemory: 128Mi\nconcurrent_requests: 4\nkeep_warm_seconds: 3\n' +
        'autoscaler:\n  type: concurrency\n  target_concurrency: 2\n  max_containers: 5\n',
    );
    expect((await stack.tern('deploy', join(dir, 'tern.yaml'))).code).toBe(0);

    // Long enough that the third container is up while all six are still in flight, on a slow machine too.
    const pending = Promise.all(Array.from({ length: 6 }, (_, i) => call('paced', { i, seconds: 12 })));
    await waitFor('three containers for six requests', async () => (await stack.actual('paced')) === 3, 60_000, 250);
    const responses = await pending;
    expect(responses.map((r) => r.status)).toEqual(Array(6).fill(200));

    const history = (await (await fetch(`${stack.gateway}/api/v1/deployments/paced/scale-events`, { headers: auth() })).json()) as {
      events: { desired: number; reason: string }[];
    };
    // Three, never more: ceil(6 / 2), where queue_depth's default (4 per container) would have asked for two.
    const asked = history.events.map((e) => `${e.desired}: ${e.reason}`);
    expect({ peak: Math.max(...history.events.map((e) => e.desired)), asked }).toEqual({ peak: 3, asked });
    expect(history.events.find((e) => e.desired === 3)?.reason).toMatch(/[56] requests \/ 2 per container → 3/);
    await waitFor('paced back to zero', async () => (await stack.actual('paced')) === 0, 30_000, 500);
  });

  it("scales a server on the load it reports at load_path, a Prometheus metric as vLLM's", async () => {
    const dir = stack.scratch('queued');
    // Every container says 12 requests wait in its own queue, whatever it is sent: with
    // target_load 10 that asks for 2 containers, then 3 (24 / 10), then max_containers.
    writeFileSync(
      join(dir, 'server.py'),
      [
        'import os',
        'from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer',
        'class H(BaseHTTPRequestHandler):',
        '    def do_GET(self):',
        '        body = b\'# TYPE queue_waiting gauge\\nqueue_waiting{model="m"} 12\\nqueue_waiting_total 900\\n\' if self.path == "/metrics" else b"ok"',
        '        self.send_response(200)',
        '        self.send_header("content-length", str(len(body)))',
        '        self.end_headers()',
        '        self.wfile.write(body)',
        '    def log_message(self, *args):',
        '        pass',
        'ThreadingHTTPServer(("0.0.0.0", int(os.environ["PORT"])), H).serve_forever()',
        '',
      ].join('\n'),
    );
    writeFileSync(
      join(dir, 'tern.yaml'),
      'name: queued\nkind: endpoint\ncommand: [python3, server.py]\ncpu: 0.25\nmemory: 128Mi\nkeep_warm_seconds: 3\n' +
        'autoscaler:\n  type: concurrency\n  min_containers: 1\n  max_containers: 3\n  target_load: 10\n' +
        '  load_path: /metrics\n  load_metric: queue_waiting\n',
    );
    expect((await stack.tern('deploy', join(dir, 'tern.yaml'))).code).toBe(0);

    // No request is ever sent: only the servers' own word scales it, and never past max_containers.
    await waitFor('three containers on reported load', async () => (await stack.actual('queued')) === 3, 45_000, 250);
    const history = (await (await fetch(`${stack.gateway}/api/v1/deployments/queued/scale-events`, { headers: auth() })).json()) as {
      events: { desired: number; reason: string }[];
    };
    const asked = history.events.map((e) => `${e.desired}: ${e.reason}`);
    expect({ peak: Math.max(...history.events.map((e) => e.desired)), asked }).toEqual({ peak: 3, asked });
    expect(history.events.find((e) => e.desired === 2)?.reason).toMatch(
      /^scale up: reported load 12 \/ 10 per container → 2 \(1 of 1 containers reported\)/,
    );
  });
});
