import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { InternetHost } from '../support/internet-host.js';
import { containerInits } from '../support/runners.js';
import { startStack, type Stack } from '../support/stack.js';
import { waitFor } from '../support/processes.js';

const EXAMPLES = fileURLToPath(new URL('../../examples', import.meta.url));

interface Task {
  task_id: string;
  status: string;
  done: boolean;
  attempts: number;
  result?: { n: number; square: number };
  error: string | null;
  started_at: string | null;
}

/** The task-queue example deployed under another name, with some spec lines changed. */
function queue(name: string, replace: Record<string, string>): string {
  const dir = stack.scratch(name);
  cpSync(join(EXAMPLES, 'task-queue'), dir, { recursive: true });
  let spec = readFileSync(join(dir, 'tern.yaml'), 'utf8').replace(/^name:.*$/m, `name: ${name}`);
  for (const [from, to] of Object.entries(replace)) spec = spec.replace(new RegExp(`^(\\s*)${from}:.*$`, 'm'), `$1${from}: ${to}`);
  writeFileSync(join(dir, 'tern.yaml'), spec);
  return join(dir, 'tern.yaml');
}

/** The task-queue issue's "done when", as a newcomer does it after `npm run up`. */
let stack: Stack;

describe('task queues end to end', () => {
  const auth = () => ({ authorization: `Bearer ${stack.token}` });

  const submit = (name: string, payload: unknown, query = '') =>
    fetch(`${stack.gateway}/taskqueue/${name}${query}`, {
      method: 'POST',
      headers: { ...auth(), 'content-type': 'application/json' },
      body: typeof payload === 'string' ? payload : JSON.stringify(payload),
    });
  const put = async (name: string, payload: unknown, query = ''): Promise<string> => {
    const res = await submit(name, payload, query);
    expect(res.status).toBe(202);
    return ((await res.json()) as { task_id: string }).task_id;
  };
  const get = async (id: string): Promise<Task> =>
    (await (await fetch(`${stack.gateway}/api/v1/tasks/${id}`, { headers: auth() })).json()) as Task;
  const wait = async (id: string, timeoutMs = 120_000): Promise<Task> => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const t = (await (await fetch(`${stack.gateway}/api/v1/tasks/${id}/wait?timeout=20`, { headers: auth() })).json()) as Task;
      if (t.done || Date.now() > deadline) return t;
    }
  };
  const actual = (name: string) => stack.actual(name);
  const putMany = async (name: string, count: number, payload: (i: number) => unknown) => {
    const ids: string[] = [];
    for (let i = 0; i < count; i += 50)
      ids.push(...(await Promise.all(Array.from({ length: Math.min(50, count - i) }, (_, k) => put(name, payload(i + k))))));
    return ids;
  };
  const services = () => stack.services();

  beforeAll(async () => {
    stack = await startStack('tasks');
  }, 120_000);

  afterAll(async () => {
    await stack?.stop();
  });

  it('runs 1,000 tasks, each COMPLETE once with its result, on containers that follow the queue up and back to 0', async () => {
    const deployed = await stack.tern('deploy', queue('squares', { keep_warm_seconds: '3', seconds: '0' }));
    expect(deployed.stdout).toContain('/taskqueue/squares');
    const peak = { containers: 0 };
    const watch = setInterval(() => {
      actual('squares').then(
        (n) => (peak.containers = Math.max(peak.containers, n)),
        () => undefined,
      );
    }, 500);
    const ids = await putMany('squares', 1000, (i) => ({ n: i, seconds: 0.02 }));
    const tasks = await Promise.all(ids.map((id) => wait(id)));
    clearInterval(watch);
    expect(tasks.filter((t) => t.status !== 'COMPLETE')).toEqual([]);
    tasks.forEach((t, i) => expect(t.result).toMatchObject({ n: i, square: i * i }));
    expect(new Set(tasks.map((t) => t.task_id)).size).toBe(1000);
    expect(peak.containers).toBeGreaterThan(1);
    await waitFor('squares back to zero', async () => (await actual('squares')) === 0, 60_000, 500);
  }, 240_000);

  it('retries a handler that fails twice, gives up on one that always fails, times out, and cancels', async () => {
    expect((await stack.tern('deploy', queue('flaky', { keep_warm_seconds: '30', max_containers: '1' }))).code).toBe(0);
    const twice = await put('flaky', { n: 3, fail_times: 2, key: 'twice' });
    const always = await put('flaky', { n: 'x' }, '?max_retries=2');
    const slow = await put('flaky', { n: 2, seconds: 30 }, '?timeout=1&max_retries=1');
    expect(await wait(twice)).toMatchObject({ status: 'COMPLETE', attempts: 3, result: { square: 9 } });
    const failed = await wait(always);
    expect(failed).toMatchObject({ status: 'ERROR', attempts: 3 });
    expect(failed.error).toMatch(/"n" must be a number/);
    const timedOut = await wait(slow);
    expect(timedOut).toMatchObject({ status: 'TIMEOUT', attempts: 2 });
    expect(timedOut.error).toMatch(/timeout of 1 s/);

    // One container, two workers: two long tasks fill it, so a third waits.
    const [a, b] = [await put('flaky', { n: 1, seconds: 60 }), await put('flaky', { n: 1, seconds: 60 })];
    await waitFor('both running', async () => (await get(a)).status === 'RUNNING' && (await get(b)).status === 'RUNNING', 30_000, 200);
    const queued = await put('flaky', { n: 4 });
    const expiring = await put('flaky', { n: 5 }, '?ttl=1');
    const cancelled = await fetch(`${stack.gateway}/api/v1/tasks/${queued}`, { method: 'DELETE', headers: auth() });
    expect(cancelled.status).toBe(200);
    expect(await cancelled.json()).toMatchObject({ status: 'CANCELLED' });
    expect((await fetch(`${stack.gateway}/api/v1/tasks/${queued}`, { method: 'DELETE', headers: auth() })).status).toBe(409);
    await waitFor('ttl expiry', async () => (await get(expiring)).status === 'EXPIRED', 15_000, 250);

    const stopRunning = await fetch(`${stack.gateway}/api/v1/tasks/${a}`, { method: 'DELETE', headers: auth() });
    expect(await stopRunning.json()).toMatchObject({ status: 'CANCELLED' });
    // The runner ended the worker running it: the freed slot takes a new task within seconds.
    const next = await put('flaky', { n: 6 });
    expect(await wait(next, 20_000)).toMatchObject({ status: 'COMPLETE', result: { square: 36 } });
    await new Promise((r) => setTimeout(r, 1000));
    expect(await get(queued)).toMatchObject({ status: 'CANCELLED', attempts: 0, started_at: null });
    expect(await get(expiring)).toMatchObject({ status: 'EXPIRED', attempts: 0 });
    await fetch(`${stack.gateway}/api/v1/tasks/${b}`, { method: 'DELETE', headers: auth() });
  }, 240_000);

  it('completes every task exactly once when the agent, a container, the gateway, the scheduler and the autoscaler are killed mid-run', async () => {
    expect(
      (await stack.tern('deploy', queue('sturdy', { keep_warm_seconds: '30', tasks_per_container: '4', max_containers: '3' }))).code,
    ).toBe(0);
    const ids = await putMany('sturdy', 40, (i) => ({ n: i, seconds: 1 }));
    await waitFor('tasks running', async () => (await get(ids[0])).status !== 'PENDING', 60_000, 200);
    process.kill(services().agent.pid, 'SIGKILL');
    await new Promise((r) => setTimeout(r, 1500));
    for (const s of ['gateway', 'scheduler', 'autoscaler']) process.kill(services()[s].pid, 'SIGKILL');
    await waitFor(
      'gateway back',
      async () => (await fetch(`${stack.gateway}/health/live`).catch(() => undefined))?.ok === true,
      60_000,
      500,
    );

    // Then a container dies under its tasks: kill -9 the runner's parent process.
    const more = await putMany('sturdy', 20, (i) => ({ n: 100 + i, seconds: 2 }));
    await waitFor('new tasks running', async () => (await get(more[0])).status === 'RUNNING', 90_000, 250);
    const deploymentId = (
      (await (await fetch(`${stack.gateway}/api/v1/deployments/sturdy`, { headers: auth() })).json()) as { deploymentId: string }
    ).deploymentId;
    const init = containerInits().find((p) => p.env.TERN_DEPLOYMENT_ID === deploymentId)?.pid;
    expect(init).toBeDefined();
    process.kill(init!, 'SIGKILL');

    const all = await Promise.all([...ids, ...more].map((id) => wait(id, 180_000)));
    expect(all.filter((t) => t.status !== 'COMPLETE').map((t) => `${t.task_id} ${t.status} ${t.error}`)).toEqual([]);
    all.forEach((t, i) => expect(t.result?.n).toBe(i < 40 ? i : 100 + i - 40));
    expect(all.some((t) => t.attempts > 1)).toBe(true);
  }, 300_000);

  it('keeps large results in the object store, calls the callback until it succeeds, and answers 429 past max_pending_tasks', async () => {
    // The callback's receiver is a host "on the internet" (its own network namespace): callbacks
    // reach public addresses only, and one on this machine's loopback is refused at submission.
    const host = await InternetHost.start([{ status: 500 }, { status: 500 }, { status: 200 }]); // fails twice, then takes it
    try {
      expect((await stack.tern('deploy', queue('big', { keep_warm_seconds: '5' }))).code).toBe(0);
      const loopbackCallback = await fetch(`${stack.gateway}/taskqueue/big?callback_url=${encodeURIComponent('http://127.0.0.1:9/x')}`, {
        method: 'POST',
        headers: { ...auth(), 'content-type': 'application/json' },
        body: '{}',
      });
      expect(loopbackCallback.status).toBe(400);
      expect(((await loopbackCallback.json()) as { message: string }).message).toMatch(/127\.0\.0\.1 is a loopback address/);
      const id = await put('big', { n: 8, pad: 1_000_000 }, `?callback_url=${encodeURIComponent(`${host.url}/done`)}`);
      const done = (await wait(id)) as Task & { result: { pad: string } };
      expect(done.status).toBe('COMPLETE');
      expect(done.result.pad).toHaveLength(1_000_000);
      const third = JSON.parse((await host.received(3, 30_000))[2].body) as { status: string; result?: { pad?: string } };
      expect(third).toMatchObject({ status: 'COMPLETE' });
      expect(third.result?.pad).toHaveLength(1_000_000);
      await waitFor(
        'callback marked delivered',
        async () => ((await get(id)) as Task & { callback?: { state: string } }).callback?.state === 'delivered',
        10_000,
        250,
      );
    } finally {
      await host.stop();
    }

    expect(
      (await stack.tern('deploy', queue('narrow', { keep_warm_seconds: '30', max_containers: '1', workers: '1', max_pending_tasks: '2' })))
        .code,
    ).toBe(0);
    const first = await put('narrow', { n: 1, seconds: 30 });
    await waitFor('first running', async () => (await get(first)).status === 'RUNNING', 60_000, 200);
    const waiting = [await put('narrow', { n: 2 }), await put('narrow', { n: 3 })];
    const refused = await submit('narrow', { n: 4 });
    expect(refused.status).toBe(429);
    expect(((await refused.json()) as { message: string }).message).toMatch(/max_pending_tasks 2/);
    // Deleting the queue cancels what it still had, running or waiting.
    expect((await stack.tern('deployment', 'delete', 'narrow')).code).toBe(0);
    for (const id of [first, ...waiting])
      expect(await get(id)).toMatchObject({ status: 'CANCELLED', error: 'cancelled: its task queue was deleted' });
  }, 180_000);

  it('answers bad input with a clear 4xx', async () => {
    expect((await stack.tern('deploy', queue('inputs', {}))).code).toBe(0);
    const notJson = await submit('inputs', 'this is not json');
    expect(notJson.status).toBe(400);
    expect(((await notJson.json()) as { message: string }).message).toMatch(/must be JSON/);
    // Any JSON value is an input but null (no body at all is {}).
    const nullInput = await submit('inputs', 'null');
    expect(nullInput.status).toBe(400);
    expect(((await nullInput.json()) as { message: string }).message).toMatch(/the task payload is null/);
    const big = await submit('inputs', JSON.stringify({ x: 'y'.repeat(600 * 1024) }));
    expect(big.status).toBe(413);
    expect(((await big.json()) as { message: string }).message).toMatch(/512 KiB limit/);
    const unknown = await submit('nope', {});
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { message: string }).message).toMatch(/task queue "nope" not found/);
    expect((await submit('inputs', {}, '?max_retries=lots')).status).toBe(400);
    const malformed = await fetch(`${stack.gateway}/api/v1/tasks/not-a-task`, { headers: auth() });
    expect(malformed.status).toBe(400);
    expect(((await malformed.json()) as { message: string }).message).toMatch(/not a task id/);
    expect((await fetch(`${stack.gateway}/api/v1/tasks/00000000-0000-4000-8000-000000000000`, { headers: auth() })).status).toBe(404);
    expect((await fetch(`${stack.gateway}/api/v1/tasks?status=DONE`, { headers: auth() })).status).toBe(400);
  });
});
