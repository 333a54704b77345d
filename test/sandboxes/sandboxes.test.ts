import { startStack, type Stack } from '../support/stack.js';
import { waitFor } from '../support/processes.js';
import { describeNeeding } from '../support/real-parts.js';

let stack: Stack;

interface Answer {
  status: number;
  text: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON answers of many shapes
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

/** The sandboxes issue's "done when", through the HTTP API, against the whole stack with a real agent and runc. */
(await describeNeeding(['root', 'runc', 'python3', 'ip', 'nft']))('sandboxes over the API', () => {
  beforeAll(async () => {
    stack = await startStack('sandbox');
  }, 180_000);

  afterAll(async () => {
    await stack?.stop();
  }, 60_000);

  it('creates a sandbox, runs Python that writes a file, reads it back, lists, runs two processes, kills one, terminates', async () => {
    const created = await api('POST', '/api/v1/sandboxes', { timeout: 600, memory: '256Mi', cpu: 0.5 });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ state: 'running', workdir: '/workspace' });
    expect(created.body.machine).toBeTruthy();
    const id = created.body.id as string;

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
    const killed = await api('DELETE', `/api/v1/sandboxes/${id}/processes/${pid}`);
    expect(killed.status).toBe(200);
    expect(killed.body).toMatchObject({ pid, state: 'killed', exit_code: null, signal: 'SIGKILL' });
    const longEvents = lines(await longRes.text());
    expect(stdoutOf(longEvents)).toBe('started\n');
    expect(longEvents.at(-1)).toMatchObject({ exit_code: null, signal: 'SIGKILL' });
    const one = await api('GET', `/api/v1/sandboxes/${id}/processes/${pid}`);
    expect(one.body).toMatchObject({ state: 'killed', output: [{ stream: 'stdout', data: 'started\n' }] });

    const gone = await api('DELETE', `/api/v1/sandboxes/${id}`);
    expect(gone.status).toBe(200);
    expect(gone.body).toMatchObject({ state: 'terminated' });
    const after = await api('POST', `/api/v1/sandboxes/${id}/exec`, { cmd: ['true'] });
    expect(after.status).toBe(409);
    expect(after.body.message).toMatch(/is terminated/);
    expect((await api('GET', '/api/v1/sandboxes')).body.sandboxes.map((s: { id: string }) => s.id)).not.toContain(id);
  }, 180_000);

  it('writes, stats, creates directories, deletes, and refuses bad input', async () => {
    const id = (await api('POST', '/api/v1/sandboxes', { memory: '256Mi' })).body.id as string;
    const bytes = new Uint8Array(3 * 2 ** 20).map((_, i) => i % 251);
    expect((await api('PUT', `/api/v1/sandboxes/${id}/files?path=/workspace/data/blob.bin`, undefined, stack.token, bytes)).status).toBe(201);
    const back = await fetch(`${stack.gateway}/api/v1/sandboxes/${id}/files?path=data/blob.bin`, { headers: { authorization: `Bearer ${stack.token}` } });
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
    await api('POST', `/api/v1/sandboxes/${id}/exec`, { cmd: ['ln', '-s', '/etc/shadow', '/workspace/shadow'] });
    expect((await api('GET', `/api/v1/sandboxes/${id}/files?path=shadow`)).status).toBe(404);
    await api('POST', `/api/v1/sandboxes/${id}/exec`, { cmd: ['ln', '-s', '/etc/hostname', '/workspace/host'] });
    expect((await api('GET', `/api/v1/sandboxes/${id}/files?path=host`)).status).not.toBe(200);

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
    const idle = (await api('POST', '/api/v1/sandboxes', { memory: '128Mi', idle_timeout: 3 })).body.id as string;
    const short = (await api('POST', '/api/v1/sandboxes', { memory: '128Mi', timeout: 4 })).body.id as string;
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
  }, 120_000);
});
