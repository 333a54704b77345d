import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startStack, type Stack } from '../support/stack.js';
import { waitFor } from '../support/processes.js';

const EXAMPLES = fileURLToPath(new URL('../../examples', import.meta.url));

/** An example copied aside with some spec lines changed (shorter keep-warm, so the test waits less). */
function example(name: string, replace: Record<string, string>): string {
  const dir = stack.scratch(name);
  cpSync(join(EXAMPLES, name), dir, { recursive: true });
  let spec = readFileSync(join(dir, 'tern.yaml'), 'utf8');
  for (const [from, to] of Object.entries(replace)) spec = spec.replace(new RegExp(`^${from}:.*$`, 'm'), `${from}: ${to}`);
  writeFileSync(join(dir, 'tern.yaml'), spec);
  return join(dir, 'tern.yaml');
}

let stack: Stack;

/** The endpoints issue's "done when", as a newcomer does it after `npm run up`. */
describe('endpoints end to end', () => {
  const call = (path: string, body: unknown, init: RequestInit = {}) =>
    fetch(`${stack.gateway}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.token}`, 'content-type': 'application/json' },
      body: typeof body === 'string' ? body : JSON.stringify(body),
      ...init,
    });
  const actual = (name: string) => stack.actual(name);

  beforeAll(async () => {
    stack = await startStack('e2e');
  }, 120_000);

  afterAll(async () => {
    await stack?.stop();
  });

  it('deploys the Python example, scales from zero, stays warm, returns to zero and starts again', async () => {
    const deployed = await stack.tern('deploy', example('hello-python', { keep_warm_seconds: '3' }));
    expect(deployed.stderr).toBe('');
    expect(deployed.stdout).toContain('Deployed hello version 1');

    const cold = await call('/endpoint/hello', { name: 'Ada' });
    expect(cold.status).toBe(200);
    expect(await cold.json()).toMatchObject({ hello: 'Ada' });
    const container = cold.headers.get('x-tern-container-id');
    expect(cold.headers.get('x-tern-request-id')).toBeTruthy();

    const warm = await call('/endpoint/hello', { name: 'Grace' });
    expect(await warm.json()).toMatchObject({ hello: 'Grace' });
    expect(warm.headers.get('x-tern-container-id')).toBe(container);

    await waitFor('scale to zero after keep-warm', async () => (await actual('hello')) === 0, 30_000, 500);
    const listed = await stack.tern('deployments');
    expect(listed.stdout).toMatch(/hello\s+endpoint\s+1\s+\S+\s+0\s+0/);

    const again = await call('/endpoint/hello@1', { name: 'Ada' });
    expect(again.status).toBe(200);
    expect(again.headers.get('x-tern-container-id')).not.toBe(container);
    expect(again.headers.get('x-tern-version')).toBe('1');
  });

  it('serves the Node example too', async () => {
    expect((await stack.tern('deploy', example('hello-node', {}))).code).toBe(0);
    const res = await call('/endpoint/hello-node', { name: 'Ada' });
    expect(res.status).toBe(200);
  });

  it('grows to max_containers under 50 concurrent requests and falls back to zero', async () => {
    expect((await stack.tern('deploy', example('sleepy', { keep_warm_seconds: '3' }))).code).toBe(0);
    // 0.5 s each (25 s of work for one container): long enough that the third container is up well
    // before the queue drains, however slow this machine's cold starts are today.
    const responses = await Promise.all(Array.from({ length: 50 }, (_, i) => call('/endpoint/sleepy', { i, seconds: 0.5 })));
    expect(responses.map((r) => r.status)).toEqual(Array(50).fill(200));
    const containers = new Set(responses.map((r) => r.headers.get('x-tern-container-id')));
    // The autoscaler scaled out to max_containers and never past it.
    const h = { headers: { authorization: `Bearer ${stack.token}` } };
    const history = (await (await fetch(`${stack.gateway}/api/v1/deployments/sleepy/scale-events`, h)).json()) as {
      events: { desired: number }[];
    };
    const peak = Math.max(...history.events.map((e) => e.desired));
    expect(peak).toBe(3);
    // All three served: a container whose address was another's a moment before is reached at once
    // (the host forgets a removed container's MAC address; before, the third often served none).
    expect({ containers: containers.size, history: history.events }).toMatchObject({ containers: 3 });
    await waitFor('sleepy back to zero', async () => (await actual('sleepy')) === 0, 30_000, 500);
  });

  it('answers a caller quickly with 502 when the agent dies mid-request', async () => {
    const dir = stack.scratch('slow');
    writeFileSync(
      join(dir, 'app.py'),
      'import time\ndef predict(p):\n    time.sleep(p.get("seconds", 0))\n    return {"slept": p.get("seconds", 0)}\n',
    );
    writeFileSync(join(dir, 'tern.yaml'), 'name: slow\nkind: endpoint\nhandler: app.py:predict\ncpu: 0.25\nmemory: 128Mi\n');
    expect((await stack.tern('deploy', join(dir, 'tern.yaml'))).code).toBe(0);
    expect((await call('/endpoint/slow', { seconds: 0 })).status).toBe(200);

    const started = Date.now();
    const pending = call('/endpoint/slow', { seconds: 12 });
    await new Promise((r) => setTimeout(r, 1000));
    const run = JSON.parse(readFileSync(join(String(stack.env.TERN_HOME), 'run.json'), 'utf8')) as {
      services: Record<string, { pid: number }>;
    };
    process.kill(run.services.agent.pid, 'SIGKILL');
    const res = await pending;
    expect(res.status).toBe(502);
    expect(((await res.json()) as { message: string }).message).toMatch(/stopped answering/);
    expect(Date.now() - started).toBeLessThan(8000);
  });

  it('serves the latest version under /endpoint/<name>/v1/… (an OpenAI baseURL) and a pinned one under @<N>', async () => {
    const dir = stack.scratch('llm');
    const deploy = async (version: number) => {
      writeFileSync(join(dir, 'app.py'), `def predict(p):\n    return {"code": ${version}}\n`);
      writeFileSync(join(dir, 'tern.yaml'), 'name: llm\nkind: endpoint\nhandler: app.py:predict\ncpu: 0.25\nmemory: 128Mi\n');
      expect((await stack.tern('deploy', join(dir, 'tern.yaml'))).code).toBe(0);
    };
    const code = async (path: string) => {
      const res = await call(path, {});
      expect(res.status).toBe(200);
      return [((await res.json()) as { code: number }).code, res.headers.get('x-tern-version')];
    };
    await deploy(1);
    expect(await code('/endpoint/llm/v1/chat/completions')).toEqual([1, '1']);
    await deploy(2);
    // The next deploy is what /v1 reaches now: no URL to edit.
    expect(await code('/endpoint/llm/v1/chat/completions')).toEqual([2, '2']);
    expect(await code('/endpoint/llm@1/v1/chat/completions')).toEqual([1, '1']);
  });

  it("passes a client's hang-up through the gateway and the agent to the container, which stops at once and frees its slot", async () => {
    const dir = stack.scratch('talker');
    // One request at a time: the status call below waits for the stream's slot.
    writeFileSync(
      join(dir, 'app.py'),
      [
        'import time',
        'state = {"items": 0, "closed_at": None}',
        'def handle(p):',
        '    return dict(state) if p.get("status") else tokens()',
        'def tokens():',
        '    try:',
        '        for i in range(200):',
        '            yield {"token": i}',
        '            state["items"] = i + 1',
        '            time.sleep(0.1)',
        '    finally:',
        '        state["closed_at"] = time.time()',
        '',
      ].join('\n'),
    );
    writeFileSync(
      join(dir, 'tern.yaml'),
      'name: talker\nkind: endpoint\nhandler: app.py:handle\nconcurrent_requests: 1\ncpu: 0.25\nmemory: 128Mi\n',
    );
    expect((await stack.tern('deploy', join(dir, 'tern.yaml'))).code).toBe(0);
    expect((await call('/endpoint/talker', { status: true })).status).toBe(200);

    const abort = new AbortController();
    const res = await call(
      '/endpoint/talker',
      {},
      {
        signal: abort.signal,
        headers: {
          authorization: `Bearer ${stack.token}`,
          'content-type': 'application/json',
          accept: 'text/event-stream',
        },
      },
    );
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    let text = '';
    while ((text.match(/data: /g) ?? []).length < 3) text += Buffer.from((await reader.read()).value!).toString();
    const hungUpAt = Date.now() / 1000;
    abort.abort();
    // The stream's slot is free within the second: this call is answered, not held for 20 s.
    const asked = Date.now();
    const status = (await (await call('/endpoint/talker', { status: true })).json()) as { items: number; closed_at: number | null };
    expect(Date.now() - asked).toBeLessThan(2500);
    expect(status.closed_at).not.toBeNull();
    expect(status.closed_at! - hungUpAt).toBeLessThan(1);
    expect(status.items).toBeLessThan(20);
  });

  it('answers bad input with the right 4xx and a message', async () => {
    const unknown = await call('/endpoint/nope', {});
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { message: string }).message).toMatch(/deployment "nope" not found/);

    const invalid = await call('/api/v1/deployments', { name: 'Bad Name', kind: 'endpoint', handler: 'x' });
    expect(invalid.status).toBe(400);
    expect(JSON.stringify(await invalid.json())).toMatch(/name must be 1-63 lower-case/);

    const gpu = await call('/api/v1/deployments', {
      name: 'gpu-app',
      kind: 'endpoint',
      command: ['python3', '-m', 'http.server'],
      gpu: 'H100',
    });
    expect(gpu.status).toBe(400);
    expect(JSON.stringify(await gpu.json())).toMatch(/no pool offers gpu H100/);

    const huge = await call('/endpoint/hello', 'x'.repeat(17 * 1024 * 1024), { headers: { authorization: `Bearer ${stack.token}` } });
    expect(huge.status).toBe(413);
  });
});
