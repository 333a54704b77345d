import { spawn } from 'node:child_process';
import { chmodSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';
import { pushTestBase } from '../images/support.js';
import { agentNetworkEnv } from '../support/agent-network.js';
import { TEST_DATABASE_URL, TEST_NATS_URL } from '../support/isolation.js';
import { PROBE_MODULE, ProbeTargets, reachable } from '../support/probe.js';
import { startStack, type Stack } from '../support/stack.js';
import { waitFor } from '../support/processes.js';
import { describeNeeding } from '../support/real-parts.js';
import { echo, WEBSOCKET_ECHO_SERVER } from '../support/websocket-echo.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

let stack: Stack;

interface Answer {
  status: number;
  text: string;
  body: any;
  headers: Headers;
}

async function api(method: string, path: string, body?: unknown, token = stack.token, raw?: Uint8Array): Promise<Answer> {
  const res = await fetch(`${stack.gateway}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(raw ? { 'content-type': 'application/octet-stream' } : body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(raw ? { body: raw } : body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: res.status, text, body: parsed, headers: res.headers };
}

const portOf = (url: string) => Number(new URL(url).port);

/** A sandbox's address on the agent's bridge, from the agent's lease of it. */
function leaseOf(sandboxId: string): string {
  const agents = join(String(stack.env.TERN_HOME), 'agent');
  for (const dir of readdirSync(agents)) {
    const leases = join(agents, dir, 'network');
    for (const f of existsSync(leases) ? readdirSync(leases) : []) {
      const lease = JSON.parse(readFileSync(join(leases, f), 'utf8')) as { containerId: string; address: string };
      if (lease.containerId === sandboxId) return lease.address;
    }
  }
  throw new Error(`no lease for sandbox ${sandboxId}`);
}

/** The pid of the stack's agent, as `up` recorded it. */
function agentPid(): number {
  const run = JSON.parse(readFileSync(join(String(stack.env.TERN_HOME), 'run.json'), 'utf8')) as {
    services: Record<string, { pid: number }>;
  };
  return run.services.agent.pid;
}

/** A running sandbox's id; small, so that the tests' sandboxes fit on a 2-core machine together. */
async function create(spec: Record<string, unknown> = {}): Promise<string> {
  const created = await api('POST', '/api/v1/sandboxes', { cpu: 0.25, memory: '256Mi', ...spec });
  expect(created).toMatchObject({ status: 201, body: { state: 'running' } });
  return created.body.id as string;
}

/** An exec's NDJSON lines, parsed. */
const lines = (text: string) =>
  text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);
const stdoutOf = (events: Record<string, unknown>[]) =>
  events
    .filter((e) => e.stream === 'stdout')
    .map((e) => e.data)
    .join('');

const wsUrl = (path: string) => `${stack.gateway.replace(/^http/, 'ws')}${path}`;
const bearer = (token?: string) => ({ headers: token ? { authorization: `Bearer ${token}` } : {} });

/**
 * A shell over its WebSocket sized `?cols=100&rows=30`: once `stty size` answered that size, a
 * resize to 132x40 (and one out of range, ignored) and `stty size` again. All it printed.
 */
function resizedShell(id: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(wsUrl(`/api/v1/sandboxes/${id}/shell?cols=100&rows=30`), bearer(stack.token));
    let output = '';
    let resized = false;
    const timer = setTimeout(() => ws.terminate(), 30_000);
    ws.on('error', reject);
    ws.on('open', () => ws.send(Buffer.from('stty size\n')));
    ws.on('message', (data: Buffer) => {
      output += data.toString('utf8');
      if (resized || !/^30 100\r?$/m.test(output)) return;
      resized = true;
      ws.send(JSON.stringify({ resize: { cols: 132, rows: 40 } }));
      ws.send(JSON.stringify({ resize: { cols: 0, rows: 40 } }));
      ws.send(Buffer.from('stty size; exit 0\n'));
    });
    ws.on('close', () => {
      clearTimeout(timer);
      resolve(output);
    });
  });
}

/** The HTTP status a WebSocket upgrade is refused with, and the refusal's message. */
function refusal(url: string, token?: string): Promise<{ status: number; message: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, bearer(token));
    ws.on('unexpected-response', (_req, res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString('utf8')));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, message: String((JSON.parse(text) as { message: unknown }).message) }));
    });
    ws.on('open', () => reject(new Error(`${url} opened`)));
    ws.on('error', (e) => reject(e));
  });
}

/** `tern sandbox shell <id>` with `input` piped in: its output and exit code. */
function shell(id: string, input: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [join(ROOT, 'bin', 'tern.js'), 'sandbox', 'shell', id], { env: stack.env, stdio: 'pipe' });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
    p.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
    // A shell that never ends fails the test with what it printed, not at the test's timeout.
    const timer = setTimeout(() => p.kill('SIGKILL'), 30_000);
    p.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    p.stdin.end(input);
  });
}

// The stack's own registry, skopeo, umoci and Tern's test base (debootstrap) serve the registry-image and snapshot test.
const describeSandboxes = await describeNeeding([
  'root',
  'runc',
  'python3',
  'ip',
  'nft',
  'umoci',
  'skopeo',
  'docker-registry',
  'debootstrap',
]);

/** The sandboxes issue's "done when", through the HTTP API, against the whole stack with a real agent and runc. */
describeSandboxes('sandboxes over the API', () => {
  beforeAll(async () => {
    // A restarted agent heartbeats again only after its network test: the TTL outlasts a restart on a loaded machine.
    stack = await startStack('sandbox', { env: { MACHINE_HEARTBEAT_INTERVAL_SECONDS: '2', MACHINE_HEARTBEAT_TTL_SECONDS: '30' } });
    // `up` returns once the services run; the machine is ready after its network test.
    await waitFor(
      'a ready machine',
      async () => ((await api('GET', '/api/v1/machines')).body as { state: string }[]).some((m) => m.state === 'ready'),
      120_000,
      500,
    );
  }, 300_000);

  afterAll(async () => {
    await stack?.stop();
  }, 60_000);

  it('creates a sandbox, runs Python that writes a file, reads it back, lists, runs two processes, kills one, terminates', async () => {
    const id = await create({ timeout: 600 });
    const created = await api('GET', `/api/v1/sandboxes/${id}`);
    expect(created.body).toMatchObject({ state: 'running', workdir: '/workspace', cpu: 0.25, memory_bytes: 256 * 2 ** 20, timeout: 600 });
    expect(created.body.machine).toBeTruthy();

    const run = await api('POST', `/api/v1/sandboxes/${id}/exec`, {
      code: "print('I am running remotely')\nopen('out.txt', 'w').write('written inside')\n",
      language: 'python',
    });
    expect(run.status).toBe(200);
    expect(run.headers.get('content-type')).toMatch(/ndjson/);
    const events = lines(run.text);
    expect(events[0]).toEqual({ pid: expect.any(String) });
    expect(stdoutOf(events)).toBe('I am running remotely\n');
    expect(events.at(-1)).toMatchObject({ exit_code: 0 });

    const file = await api('GET', `/api/v1/sandboxes/${id}/files?path=out.txt`);
    expect(file.status).toBe(200);
    expect(file.text).toBe('written inside');
    const listed = await api('GET', `/api/v1/sandboxes/${id}/files/list?path=/workspace`);
    expect(listed.status).toBe(200);
    expect(listed.body.entries).toEqual([expect.objectContaining({ name: 'out.txt', type: 'file', size: 14 })]);

    // Two at once: one that would run a minute, one that answers; kill the first.
    const long = fetch(`${stack.gateway}/api/v1/sandboxes/${id}/exec`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ cmd: ['sh', '-c', 'echo started; sleep 60; echo never'] }),
    });
    const longRes = await long;
    const pid = longRes.headers.get('x-tern-process-id')!;
    expect(pid).toBeTruthy();
    const quick = await api('POST', `/api/v1/sandboxes/${id}/exec`, { cmd: ['echo', 'beside it'] });
    expect(stdoutOf(lines(quick.text))).toBe('beside it\n');
    const processes = await api('GET', `/api/v1/sandboxes/${id}/processes`);
    expect(processes.body.processes).toEqual(expect.arrayContaining([expect.objectContaining({ pid, state: 'running' })]));
    // Killed once it has printed (on a loaded machine the shell may not have run its echo yet).
    await waitFor(
      'the long process printed',
      async () => JSON.stringify((await api('GET', `/api/v1/sandboxes/${id}/processes/${pid}`)).body.output ?? []).includes('started'),
      30_000,
      100,
    );
    const killedAt = Date.now();
    const killed = await api('DELETE', `/api/v1/sandboxes/${id}/processes/${pid}`);
    expect(killed.status).toBe(200);
    expect(killed.body).toMatchObject({ pid, state: 'killed', exit_code: null, signal: 'SIGKILL' });
    const longEvents = lines(await longRes.text());
    // Its child (the sleep) went with it: the output ended at once, not after the minute.
    expect(Date.now() - killedAt).toBeLessThan(20_000);
    expect(stdoutOf(longEvents)).toBe('started\n');
    expect(longEvents.at(-1)).toMatchObject({ exit_code: null, signal: 'SIGKILL' });
    const one = await api('GET', `/api/v1/sandboxes/${id}/processes/${pid}`);
    expect(one.body).toMatchObject({ state: 'killed', output: [{ stream: 'stdout', data: 'started\n' }] });

    const kept = await api('POST', `/api/v1/sandboxes/${id}/keepalive`);
    expect(kept).toMatchObject({ status: 200, body: { id, state: 'running' } });
    expect(Date.parse(kept.body.active_at)).toBeGreaterThanOrEqual(Date.parse(created.body.active_at));

    const gone = await api('DELETE', `/api/v1/sandboxes/${id}`);
    expect(gone.status).toBe(200);
    expect(gone.body).toMatchObject({ state: 'terminated' });
    const after = await api('POST', `/api/v1/sandboxes/${id}/exec`, { cmd: ['true'] });
    expect(after.status).toBe(409);
    expect(after.body.message).toMatch(/is terminated/);
    expect((await api('GET', '/api/v1/sandboxes')).body.sandboxes.map((s: { id: string }) => s.id)).not.toContain(id);
    expect((await api('GET', '/api/v1/sandboxes?live=false')).body.sandboxes).toEqual(
      expect.arrayContaining([expect.objectContaining({ id, state: 'terminated', state_reason: 'deleted through the API' })]),
    );
    expect((await api('POST', `/api/v1/sandboxes/${id}/keepalive`)).status).toBe(409);
    expect((await api('DELETE', `/api/v1/sandboxes/${id}`)).body).toMatchObject({ state: 'terminated' });
  }, 180_000);

  it('writes, stats, creates directories, deletes, and refuses bad input', async () => {
    const id = await create();
    const bytes = new Uint8Array(3 * 2 ** 20).map((_, i) => i % 251);
    expect((await api('PUT', `/api/v1/sandboxes/${id}/files?path=/workspace/data/blob.bin`, undefined, stack.token, bytes)).status).toBe(
      201,
    );
    const back = await fetch(`${stack.gateway}/api/v1/sandboxes/${id}/files?path=data/blob.bin`, {
      headers: { authorization: `Bearer ${stack.token}` },
    });
    expect(Buffer.from(await back.arrayBuffer()).equals(Buffer.from(bytes))).toBe(true);
    const stat = await api('GET', `/api/v1/sandboxes/${id}/files/stat?path=data/blob.bin`);
    expect(stat.body).toMatchObject({ name: 'blob.bin', path: '/workspace/data/blob.bin', type: 'file', size: bytes.length });
    expect((await api('POST', `/api/v1/sandboxes/${id}/files/mkdir?path=a/b/c`)).status).toBe(201);
    expect((await api('GET', `/api/v1/sandboxes/${id}/files/stat?path=a/b/c`)).body).toMatchObject({ type: 'directory' });
    expect((await api('DELETE', `/api/v1/sandboxes/${id}/files?path=data`)).status).toBe(200);
    expect((await api('GET', `/api/v1/sandboxes/${id}/files?path=data/blob.bin`)).status).toBe(404);

    // Escapes: `..` is refused outright; a symlink resolves inside the sandbox, never to the machine's files.
    const dotdot = await api('GET', `/api/v1/sandboxes/${id}/files?path=/workspace/../../etc/shadow`);
    expect(dotdot.status).toBe(400);
    expect(dotdot.body.message).toEqual(expect.arrayContaining([expect.stringMatching(/\.\./)]));
    const secret = join(stack.scratch('host-secret'), 'secret.txt');
    writeFileSync(secret, 'the machine’s own file');
    chmodSync(dirname(secret), 0o755);
    const link = await api('POST', `/api/v1/sandboxes/${id}/exec`, { cmd: ['ln', '-s', secret, '/workspace/secret'] });
    expect(lines(link.text).at(-1)).toMatchObject({ exit_code: 0 });
    const followed = await api('GET', `/api/v1/sandboxes/${id}/files?path=secret`);
    expect(followed.status).toBe(404);
    expect(followed.text).not.toContain('own file');
    expect((await api('GET', `/api/v1/sandboxes/${id}/files/stat?path=secret`)).body).toMatchObject({ type: 'symlink' });

    const tooBig = await api('PUT', `/api/v1/sandboxes/${id}/files?path=big`, undefined, stack.token, new Uint8Array(64 * 2 ** 20 + 1));
    expect(tooBig.status).toBe(413);
    const notList = await api('POST', `/api/v1/sandboxes/${id}/exec`, { cmd: 'ls -l' });
    expect(notList.status).toBe(400);
    expect(notList.body.message.join(' ')).toMatch(/cmd must be a list of strings/);
    expect((await api('GET', '/api/v1/sandboxes/sb-nope')).status).toBe(404);
    expect((await api('POST', '/api/v1/sandboxes/sb-nope/exec', { cmd: ['true'] })).status).toBe(404);

    const other = await api('POST', '/api/v1/workspaces', { name: 'sandbox-other' });
    expect(other.status).toBe(201);
    expect((await api('GET', `/api/v1/sandboxes/${id}`, undefined, other.body.token)).status).toBe(404);
    expect((await api('POST', `/api/v1/sandboxes/${id}/exec`, { cmd: ['true'] }, other.body.token)).status).toBe(404);
    expect((await api('DELETE', `/api/v1/sandboxes/${id}`, undefined, other.body.token)).status).toBe(404);
    expect((await api('DELETE', `/api/v1/sandboxes/${id}`)).status).toBe(200);
  }, 180_000);

  it('ends a sandbox at its idle timeout and at its lifetime', async () => {
    const idle = await create({ idle_timeout: 3 });
    const short = await create({ timeout: 4 });
    await waitFor(
      'both ended',
      async () => {
        const states = await Promise.all([idle, short].map(async (id) => (await api('GET', `/api/v1/sandboxes/${id}`)).body.state));
        return states.every((s) => s === 'terminated');
      },
      60_000,
      500,
    );
    expect((await api('GET', `/api/v1/sandboxes/${idle}`)).body.state_reason).toMatch(/idle for 3 s/);
    expect((await api('GET', `/api/v1/sandboxes/${short}`)).body.state_reason).toMatch(/lifetime of 4 s/);

    // Metered as containers are, as their own line; every sandbox here held 0.25 cores and 256 MiB.
    const usage = await waitFor(
      'sandbox usage',
      async () => {
        const report = await api('GET', '/api/v1/usage?group_by=deployment');
        const row = (report.body.rows as { group: string; name: string; containerSeconds: number }[]).find((r) => r.group === 'sandbox');
        return row && row.containerSeconds >= 7 ? row : undefined;
      },
      60_000,
      1000,
    );
    expect(usage).toMatchObject({ name: 'sandboxes', gpuSeconds: 0 });
    expect((usage as unknown as { cpuCoreSeconds: number }).cpuCoreSeconds).toBeCloseTo(usage.containerSeconds * 0.25, 1);
    expect((usage as unknown as { memoryGibSeconds: number }).memoryGibSeconds).toBeCloseTo(usage.containerSeconds * 0.25, 1);
  }, 120_000);

  it('does the same through the CLI', async () => {
    const created = await stack.tern('sandbox', 'create', '--cpu', '0.25', '--memory', '256Mi', '--timeout', '600');
    expect(created).toMatchObject({ code: 0, stderr: '' });
    const id = created.stdout.trim();
    expect(id).toMatch(/^sb-[\w-]+$/);

    const run = await stack.tern('sandbox', 'exec', id, '--code', "print('hi from the cli')\nopen('cli.txt', 'w').write('cli file')");
    expect(run).toMatchObject({ code: 0, stdout: 'hi from the cli\n', stderr: '' });
    const failing = await stack.tern('sandbox', 'exec', id, '--', 'sh', '-c', 'echo oops >&2; exit 3');
    expect(failing).toMatchObject({ code: 3, stdout: '', stderr: 'oops\n' });

    const dir = stack.scratch('sandbox-cp');
    expect((await stack.tern('sandbox', 'cp', `${id}:cli.txt`, join(dir, 'back.txt'))).code).toBe(0);
    expect(readFileSync(join(dir, 'back.txt'), 'utf8')).toBe('cli file');
    writeFileSync(join(dir, 'up.txt'), 'from the laptop');
    expect((await stack.tern('sandbox', 'cp', join(dir, 'up.txt'), `${id}:/workspace/up.txt`)).code).toBe(0);
    const listed = await stack.tern('sandbox', 'ls', id);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(/file\s+8\s+\S+\s+cli\.txt/);
    expect(listed.stdout).toMatch(/file\s+15\s+\S+\s+up\.txt/);
    expect((await stack.tern('sandbox', 'list')).stdout).toMatch(new RegExp(`${id}\\s+running`));

    expect(await stack.tern('sandbox', 'rm', id)).toMatchObject({ code: 0, stdout: `Sandbox ${id} terminated.\n` });
    const after = await stack.tern('sandbox', 'exec', id, '--', 'true');
    expect(after.code).toBe(1);
    expect(after.stderr).toMatch(/409 sandbox .* is terminated/);
  }, 180_000);

  it('answers through an exposed port on the gateway', async () => {
    const id = await create();
    const page = new TextEncoder().encode('hello from inside');
    expect((await api('PUT', `/api/v1/sandboxes/${id}/files?path=site/index.html`, undefined, stack.token, page)).status).toBe(201);
    const server = await api('POST', `/api/v1/sandboxes/${id}/exec`, {
      cmd: ['sh', '-c', 'cd site && nohup python3 -m http.server 8000 > /dev/null 2>&1 &'],
    });
    expect(lines(server.text).at(-1)).toMatchObject({ exit_code: 0 });

    expect((await api('GET', `/sandbox/${id}/8000/index.html`)).status).toBe(404);
    const exposed = await api('POST', `/api/v1/sandboxes/${id}/ports`, { port: 8000 });
    expect(exposed.status).toBe(201);
    expect(exposed.body.url).toBe(`${stack.gateway}/sandbox/${id}/8000/`);
    expect((await api('GET', `/api/v1/sandboxes/${id}`)).body.ports).toEqual([8000]);
    const answer = await waitFor(
      'the server in the sandbox answers',
      async () => {
        const r = await api('GET', `/sandbox/${id}/8000/index.html?x=1`);
        return r.status === 200 ? r : undefined;
      },
      30_000,
      500,
    );
    expect(answer.text).toBe('hello from inside');
    expect(answer.headers.get('content-type')).toMatch(/text\/html/);
    expect((await api('GET', `/sandbox/${id}/8000/missing.html`)).status).toBe(404);
    expect((await api('POST', `/api/v1/sandboxes/${id}/ports`, { port: 'eighty' })).status).toBe(400);
    expect((await api('DELETE', `/api/v1/sandboxes/${id}`)).status).toBe(200);
    expect((await api('GET', `/sandbox/${id}/8000/index.html`)).status).toBe(409);
  }, 120_000);

  it('carries a WebSocket through an exposed port, and through a public URL without a token', async () => {
    const id = await create();
    expect(
      (await api('PUT', `/api/v1/sandboxes/${id}/files?path=ws.py`, undefined, stack.token, Buffer.from(WEBSOCKET_ECHO_SERVER))).status,
    ).toBe(201);
    const server = await api('POST', `/api/v1/sandboxes/${id}/exec`, { cmd: ['sh', '-c', 'nohup python3 ws.py 8765 > ws.log 2>&1 &'] });
    expect(lines(server.text).at(-1)).toMatchObject({ exit_code: 0 });

    // Refused before any byte reaches the sandbox: a port not exposed, no token, another workspace's token.
    expect(await refusal(wsUrl(`/sandbox/${id}/8765/chat`), stack.token)).toMatchObject({ status: 404, message: /not exposed/ });
    expect((await api('POST', `/api/v1/sandboxes/${id}/ports`, { port: 8765 })).status).toBe(201);
    expect((await refusal(wsUrl(`/sandbox/${id}/8765/chat`))).status).toBe(401);
    const other = await api('POST', '/api/v1/workspaces', { name: 'sandbox-ws-other' });
    expect((await refusal(wsUrl(`/sandbox/${id}/8765/chat`), other.body.token)).status).toBe(404);

    const echoed = await waitFor(
      'the echo server answers',
      () =>
        echo(wsUrl(`/sandbox/${id}/8765/chat?room=1`), { authorization: `Bearer ${stack.token}` }, ['hello', 'again']).catch(
          () => undefined,
        ),
      30_000,
      500,
    );
    expect(echoed).toEqual(['/chat?room=1 hello', '/chat?room=1 again']);
    // A message larger than a tunnel's 64 KiB messages comes back whole.
    const blob = Buffer.from(new Uint8Array(300 * 1024).map((_, i) => i % 253));
    const [back] = await echo(wsUrl(`/sandbox/${id}/8765/`), { authorization: `Bearer ${stack.token}` }, [blob]);
    expect(Buffer.isBuffer(back) && back.equals(blob)).toBe(true);

    const exposed = await api('POST', `/api/v1/sandboxes/${id}/ports`, { port: 8765, public: true });
    expect(exposed.status).toBe(201);
    expect(exposed.body).toMatchObject({ port: 8765, public: true });
    const url = exposed.body.url as string;
    expect(url).toMatch(new RegExp(`^${stack.gateway}/sandbox-public/[\\w-]{43}/$`));
    expect((await api('POST', `/api/v1/sandboxes/${id}/ports`, { port: 8765, public: true })).body.url).toBe(url);
    const path = new URL(url).pathname;
    expect((await api('GET', `/api/v1/sandboxes/${id}`)).body.public_ports).toEqual([{ port: 8765, path }]);
    // No token at all: the URL is the credential, for HTTP and for a WebSocket.
    const plain = await fetch(`${url}page?q=1`);
    expect([plain.status, await plain.text()]).toEqual([200, 'plain /page?q=1']);
    expect(await echo(wsUrl(`${path}live`), {}, ['open'])).toEqual(['/live open']);
    expect((await fetch(`${stack.gateway}/sandbox-public/${'A'.repeat(43)}/page`)).status).toBe(404);
    expect((await refusal(wsUrl(`/sandbox-public/${'A'.repeat(43)}/live`))).status).toBe(404);

    expect((await api('DELETE', `/api/v1/sandboxes/${id}`)).status).toBe(200);
    expect((await fetch(`${url}page`)).status).toBe(404);
    expect((await refusal(wsUrl(`${path}live`))).status).toBe(404);
    expect((await refusal(wsUrl(`/sandbox/${id}/8765/chat`), stack.token)).status).toBe(409);
  }, 120_000);

  it('opens an interactive shell on a pty over a WebSocket through the CLI', async () => {
    const id = await create();
    const session = await shell(id, 'tty\necho "answer $((6 * 7))" > from-shell.txt; cat from-shell.txt\nexit 0\n');
    expect(session).toEqual({ code: 0, stdout: expect.any(String), stderr: '' });
    // A terminal: the pty echoes what was typed, and the shell's stdin is a pty.
    expect(session.stdout).toMatch(/\/dev\/pts\/\d+/);
    expect(session.stdout).toContain('echo "answer $((6 * 7))" > from-shell.txt');
    expect(session.stdout).toMatch(/^answer 42\r?$/m);
    expect((await api('GET', `/api/v1/sandboxes/${id}/files?path=from-shell.txt`)).text).toBe('answer 42\n');
    // A shell fed from a pipe ends with its input, exit or not.
    const piped = await shell(id, 'echo still here\n');
    expect(piped).toEqual({ code: 0, stdout: expect.stringMatching(/^still here\r?$/m), stderr: '' });
    // The pty follows the terminal's size: `{"resize":…}` between keystrokes, taken in order.
    expect(await resizedShell(id)).toMatch(/^30 100\r?$[\s\S]*^40 132\r?$/m);

    expect((await api('GET', `/api/v1/sandboxes/${id}/shell`)).status).toBe(426);
    expect((await refusal(wsUrl(`/api/v1/sandboxes/${id}/shell`))).status).toBe(401);
    const unknown = await stack.tern('sandbox', 'shell', 'sb-nope');
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/404 sandbox sb-nope not found/);
    expect((await api('DELETE', `/api/v1/sandboxes/${id}`)).status).toBe(200);
    expect((await stack.tern('sandbox', 'shell', id)).stderr).toMatch(/409 sandbox .* is terminated/);
  }, 120_000);

  it('mounts the volumes a sandbox names, read-only or its own copy, and commits the copy on request and when it ends', async () => {
    for (const name of ['sbx-data', 'sbx-models']) expect((await api('POST', '/api/v1/volumes', { name })).status).toBe(201);
    const put = await api('PUT', '/api/v1/volumes/sbx-models/files?path=weights.txt', undefined, stack.token, Buffer.from('w1'));
    expect(put.status).toBeLessThan(300);
    const refused = async (volumes: unknown) => {
      const r = await api('POST', '/api/v1/sandboxes', { cpu: 0.25, memory: '256Mi', volumes });
      expect(r.status).toBe(400);
      return String(r.body.message);
    };
    expect(await refused([{ name: 'sbx-nope', path: '/data' }])).toMatch(/volume sbx-nope not found in this workspace/);
    expect(await refused([{ name: 'sbx-data', path: '/workspace' }])).toMatch(/sandbox's own \/workspace/);
    expect(await refused([{ name: 'sbx-data', path: 'data' }])).toMatch(/must be an absolute path/);
    expect(
      await refused([
        { name: 'sbx-data', path: '/a' },
        { name: 'sbx-models', path: '/a' },
      ]),
    ).toMatch(/mount path of another volume/);

    const id = await create({
      volumes: [
        { name: 'sbx-data', path: '/data' },
        { name: 'sbx-models', path: '/models', read_only: true },
      ],
    });
    const run = await api('POST', `/api/v1/sandboxes/${id}/exec`, {
      cmd: ['sh', '-c', 'cat /models/weights.txt; echo result > /data/out.txt; touch /models/new 2>/dev/null || echo read-only'],
    });
    const events = lines(run.text);
    expect(stdoutOf(events)).toBe('w1read-only\n');
    expect(events.at(-1)).toMatchObject({ exit_code: 0 });
    // Committed through the API while it runs: its read-write copy, not its read-only mount.
    const commit = await api('POST', '/api/v1/volumes/sbx-data/commit');
    expect(commit).toMatchObject({ status: 200, body: { containers: [{ containerId: id, outcome: 'committed', written: 1 }] } });
    expect((await api('GET', '/api/v1/volumes/sbx-data/files?path=out.txt')).text).toBe('result\n');
    expect((await api('POST', '/api/v1/volumes/sbx-models/commit')).body).toMatchObject({ containers: [] });
    await api('POST', `/api/v1/sandboxes/${id}/exec`, { cmd: ['sh', '-c', 'echo again > /data/out.txt'] });
    // Committed before the DELETE answers (the agent commits while it removes the sandbox).
    expect((await api('DELETE', `/api/v1/sandboxes/${id}`)).status).toBe(200);
    expect((await api('GET', '/api/v1/volumes/sbx-data/files?path=out.txt')).text).toBe('again\n');
    expect((await api('GET', '/api/v1/volumes/sbx-models')).body).toMatchObject({ files: 1 });
  }, 120_000);

  it('answers 202 while placing when asked not to wait, and GET follows it to running', async () => {
    const placing = await api('POST', '/api/v1/sandboxes?wait=0', { cpu: 0.25, memory: '256Mi' });
    expect(placing).toMatchObject({ status: 202, body: { state: 'placing', machine: expect.any(String) } });
    const id = placing.body.id as string;
    expect(placing.headers.get('location')).toBe(`/api/v1/sandboxes/${id}`);
    await waitFor('running', async () => (await api('GET', `/api/v1/sandboxes/${id}`)).body.state === 'running', 60_000, 200);
    expect(stdoutOf(lines((await api('POST', `/api/v1/sandboxes/${id}/exec`, { cmd: ['echo', 'placed'] })).text))).toBe('placed\n');
    expect((await api('POST', '/api/v1/sandboxes?wait=soon', {})).status).toBe(400);
    expect((await api('DELETE', `/api/v1/sandboxes/${id}`)).status).toBe(200);
  }, 90_000);

  it('runs a registry image, snapshots its /workspace, and a new sandbox of this workspace only starts from the snapshot', async () => {
    const config = JSON.parse(readFileSync(join(stack.env.HOME!, '.tern', 'config.json'), 'utf8')) as {
      contexts: { local: { registry: { url: string } } };
    };
    const host = new URL(config.contexts.local.registry.url).host;
    // The registry takes the gateway's tokens: the operator's API token pushes Tern's test base.
    const base = await pushTestBase({ host, builder: { host, insecure: true, username: 'tern', password: stack.token } });

    expect((await api('POST', '/api/v1/sandboxes', { image: 'python:3.12' })).body.message).toEqual([
      expect.stringMatching(/python:3.12.*names no registry/),
    ]);
    const missing = await api('POST', '/api/v1/sandboxes', { image: `${host}/tern/missing:1` });
    expect(missing.status).toBe(400);
    expect(String(missing.body.message)).toContain(`${host}/tern/missing:1`);
    // A host sandbox's snapshot needs Tern's base (tern/base:bookworm), which this registry lacks.
    const plain = await create();
    const refused = await api('POST', `/api/v1/sandboxes/${plain}/snapshot`, {});
    expect(refused.status).toBe(409);
    expect(refused.body.message).toMatch(/Tern's base image .* sudo tern image base/);
    expect((await api('DELETE', `/api/v1/sandboxes/${plain}`)).status).toBe(200);

    // A first start pulls and unpacks the image: followed with GET past the create's own wait.
    const placing = await api('POST', '/api/v1/sandboxes?wait=0', { cpu: 0.25, memory: '256Mi', image: base.ref });
    expect(placing).toMatchObject({ status: 202, body: { image: `${host}/tern/base@${base.digest}` } });
    const first = placing.body.id as string;
    await waitFor(
      'the image sandbox running',
      async () => (await api('GET', `/api/v1/sandboxes/${first}`)).body.state === 'running',
      240_000,
      500,
    );
    const written = await api('POST', `/api/v1/sandboxes/${first}/exec`, {
      code: "print(open('/etc/tern-base').read().split()[0])\nopen('notes.txt', 'w').write('from the first sandbox')\n",
    });
    expect(stdoutOf(lines(written.text))).toBe('debian\n');

    expect((await api('POST', `/api/v1/sandboxes/${first}/snapshot`, { name: 'Bad Name' })).status).toBe(400);
    const snap = await api('POST', `/api/v1/sandboxes/${first}/snapshot`, { name: 'notes', tag: 'v1' });
    expect(snap).toMatchObject({ status: 201, body: { tag: 'notes:v1', digest: expect.stringMatching(/^sha256:/) } });
    expect(snap.body.image).toBe(`${host}/builds/${snap.body.image.split('/')[2]}/snapshots/notes@${snap.body.digest}`);
    expect((await api('DELETE', `/api/v1/sandboxes/${first}`)).status).toBe(200);

    // Another workspace cannot run it, and learns nothing of it (the same answer as for any other workspace's build).
    const other = await api('POST', '/api/v1/workspaces', { name: 'sandbox-snapshot-other' });
    const stolen = await api('POST', '/api/v1/sandboxes', { image: snap.body.image }, other.body.token);
    expect(stolen.status).toBe(400);
    expect(String(stolen.body.message)).toMatch(/builds\/ holds each workspace's own builds .*name one of yours/);

    // The machine pulls the snapshot because a sandbox of it is placed there; its /workspace holds the file.
    const second = await create({ image: snap.body.image });
    const read = await api('POST', `/api/v1/sandboxes/${second}/exec`, {
      cmd: ['sh', '-c', 'cat /workspace/notes.txt; echo; cat /etc/tern-base'],
    });
    expect(stdoutOf(lines(read.text))).toMatch(/^from the first sandbox\ndebian /);
    // Its own copy: writable by the sandbox's user.
    expect(
      (await api('PUT', `/api/v1/sandboxes/${second}/files?path=notes.txt`, undefined, stack.token, Buffer.from('changed'))).status,
    ).toBeLessThan(300);
    expect((await api('DELETE', `/api/v1/sandboxes/${second}`)).status).toBe(200);
  }, 420_000);

  it('places a sandbox that asks for a GPU only on a machine that has one', async () => {
    const gpu = await api('POST', '/api/v1/sandboxes', { cpu: 0.25, memory: '256Mi', gpu: 'H100' });
    expect(gpu.status).toBe(503);
    expect(gpu.body.message).toMatch(/no ready machine in pool default with .*H100/);
    expect((await api('POST', '/api/v1/sandboxes', { cpu: 0.25, memory: '256Mi', gpu_count: 1 })).status).toBe(503);
    expect((await api('POST', '/api/v1/sandboxes', { cpu: 0.25, memory: '256Mi', gpu: 'any', gpu_count: 0 })).status).toBe(400);
  }, 60_000);

  it('cannot reach the control plane, the host or another sandbox from inside', async () => {
    const neighbour = await create();
    const server = await api('POST', `/api/v1/sandboxes/${neighbour}/exec`, {
      cmd: ['sh', '-c', 'nohup python3 -m http.server 8000 > /dev/null 2>&1 &'],
    });
    expect(lines(server.text).at(-1)).toMatchObject({ exit_code: 0 });
    const neighbourAddress = leaseOf(neighbour);
    const bridge = agentNetworkEnv(String(stack.env.TERN_HOME)).AGENT_NETWORK_SUBNET.replace(/0\/24$/, '1');
    const state = JSON.parse(readFileSync(join(String(stack.env.TERN_HOME), 'state.json'), 'utf8')) as { ports: Record<string, number> };
    const services = [portOf(TEST_NATS_URL), portOf(TEST_DATABASE_URL), portOf(stack.gateway), state.ports.agent];
    // Controls: each is there, seen from the host.
    await waitFor('the neighbour serves', () => reachable(neighbourAddress, 8000), 30_000, 500);
    for (const p of services) expect([p, await reachable('127.0.0.1', p)]).toEqual([p, true]);

    const prober = await create();
    expect(
      (await api('PUT', `/api/v1/sandboxes/${prober}/files?path=probe.py`, undefined, stack.token, Buffer.from(PROBE_MODULE))).status,
    ).toBe(201);
    const targets = [
      ...services.map((p) => `127.0.0.1:${p}`),
      ...services.map((p) => `${bridge}:${p}`),
      ...(ProbeTargets.hostAddress ? services.map((p) => `${ProbeTargets.hostAddress}:${p}`) : []),
      `${neighbourAddress}:8000`,
    ];
    const probed = await api('POST', `/api/v1/sandboxes/${prober}/exec`, { cmd: ['python3', 'probe.py', JSON.stringify(targets)] });
    const result = JSON.parse(stdoutOf(lines(probed.text))) as Record<string, string>;
    expect(Object.keys(result).sort()).toEqual([...targets].sort());
    expect(targets.filter((t) => result[t] === 'open')).toEqual([]);
    for (const id of [neighbour, prober]) expect((await api('DELETE', `/api/v1/sandboxes/${id}`)).status).toBe(200);
  }, 120_000);

  it('keeps a sandbox, its files and its processes across a restart of its agent', async () => {
    const id = await create({ timeout: 600 });
    expect(
      (await api('PUT', `/api/v1/sandboxes/${id}/files?path=kept.txt`, undefined, stack.token, Buffer.from('still here'))).status,
    ).toBe(201);
    const started = (cmd: string[], extra: Record<string, unknown> = {}) =>
      fetch(`${stack.gateway}/api/v1/sandboxes/${id}/exec`, {
        method: 'POST',
        headers: { authorization: `Bearer ${stack.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ cmd, ...extra }),
      });
    // One that ends while no agent runs, one that outlives the restart (and is killed after it).
    const ending = await started(['sh', '-c', 'echo a; sleep 3; echo b; exit 7']);
    const endingPid = ending.headers.get('x-tern-process-id')!;
    const long = await started(['sh', '-c', 'echo long; sleep 300'], { keep_stdin_open: true, timeout: 400 });
    const longPid = long.headers.get('x-tern-process-id')!;
    const reader = ending.body!.getReader();
    for (let seen = ''; !seen.includes('"a\\n"');) seen += Buffer.from((await reader.read()).value ?? []).toString('utf8');
    await reader.cancel();
    await long.body!.cancel();
    // `up` supervises the agent: killed, it is started again, and adopts the sandbox's container and processes.
    process.kill(agentPid(), 'SIGKILL');
    const back = await waitFor(
      'the sandbox answers again',
      async () => {
        const r = await api('GET', `/api/v1/sandboxes/${id}/files?path=kept.txt`);
        if (r.status === 409) throw new Error(`the sandbox ended instead: ${JSON.stringify(r.body)}`);
        return r.status === 200 ? r : undefined;
      },
      120_000,
      1000,
    );
    expect(back.text).toBe('still here');
    const ended = await waitFor(
      'the process that ended while the agent was down, with its exit code',
      async () => {
        const r = await api('GET', `/api/v1/sandboxes/${id}/processes/${endingPid}`);
        return r.body?.state === 'exited' ? r.body : undefined;
      },
      30_000,
      200,
    );
    expect(ended).toMatchObject({ exit_code: 7, signal: null });
    expect(stdoutOf(ended.output)).toBe('a\nb\n');
    const listed = (await api('GET', `/api/v1/sandboxes/${id}/processes`)).body.processes;
    expect(listed).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ pid: endingPid, state: 'exited', exit_code: 7 }),
        expect.objectContaining({ pid: longPid, state: 'running', cmd: ['sh', '-c', 'echo long; sleep 300'] }),
      ]),
    );
    // Its stdin was the old agent's pipe; kill goes on working, its children with it.
    expect((await api('POST', `/api/v1/sandboxes/${id}/processes/${longPid}/stdin`, { data: 'x' })).status).toBe(409);
    const killed = await api('DELETE', `/api/v1/sandboxes/${id}/processes/${longPid}`);
    expect(killed).toMatchObject({ status: 200, body: { pid: longPid, state: 'killed', signal: 'SIGKILL' } });
    expect((await api('GET', `/api/v1/sandboxes/${id}/processes/${longPid}`)).body.output).toEqual([{ stream: 'stdout', data: 'long\n' }]);
    // New processes take new pids, streamed as before.
    const after = lines((await api('POST', `/api/v1/sandboxes/${id}/exec`, { cmd: ['cat', 'kept.txt'] })).text);
    expect(stdoutOf(after)).toBe('still here');
    expect([endingPid, longPid]).not.toContain(after[0].pid);
    expect((await api('DELETE', `/api/v1/sandboxes/${id}`)).status).toBe(200);
    // It takes new sandboxes again too: its command subscriptions come up after it adopted this one
    // (a create in between finds no responder), so the next test does not race the restart.
    const fresh = await waitFor(
      'the restarted agent to start a new sandbox',
      async () => {
        const r = await api('POST', '/api/v1/sandboxes', { cpu: 0.25, memory: '256Mi' });
        if (r.status !== 201) throw new Error(`${r.status} ${String(r.body?.message)}`);
        return r.body.id as string;
      },
      60_000,
      1000,
    );
    expect((await api('DELETE', `/api/v1/sandboxes/${fresh}`)).status).toBe(200);
  }, 240_000);

  it('reports a sandbox lost, not running, when its machine goes offline', async () => {
    const id = await create();
    // Frozen rather than killed (a killed agent is restarted): its heartbeats stop, the machine goes offline.
    const pid = agentPid();
    process.kill(pid, 'SIGSTOP');
    try {
      await waitFor('the sandbox lost', async () => (await api('GET', `/api/v1/sandboxes/${id}`)).body.state === 'lost', 90_000, 500);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    expect((await api('GET', `/api/v1/sandboxes/${id}`)).body.state_reason).toMatch(/went offline/);
    expect((await api('POST', `/api/v1/sandboxes/${id}/exec`, { cmd: ['true'] })).status).toBe(409);
  }, 120_000);
});
