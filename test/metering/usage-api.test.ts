import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type pg from 'pg';
import type { NatsConnection } from '@nats-io/transport-node';
import { CONTAINER_STARTED } from '#tern/contracts';
import { HOUR_MS, hourFloor } from '#tern/metering';
import { connectNats, Messaging, Namespace } from '#tern/messaging';
import { createTestSchema, TEST_NATS, type TestSchema, testEnv, uniqueName } from '../support/isolation.js';
import { deleteNamespaces } from '../support/nats.js';
import { freePort, ServiceProcess, waitFor } from '../support/processes.js';
import {
  expectedUsage,
  HEARTBEAT_TTL_SECONDS,
  makeScenario,
  placeScenario,
  progress,
  publishAll,
  type Scenario,
  schemaClient,
} from './scenario.js';

const ADMIN = `tern_${'u'.repeat(43)}`;
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const within1pct = (actual: number, expected: number) =>
  expect(Math.abs(actual - expected)).toBeLessThanOrEqual(Math.max(1e-6, Math.abs(expected) * 0.01));

/** The usage API and `tern usage` over what a real metering process wrote from real events. */
describe('usage API', () => {
  let schema: TestSchema;
  let ns: Namespace;
  let nc: NatsConnection;
  let db: pg.Client;
  let metering: ServiceProcess;
  let gateway: ServiceProcess;
  let base: string;
  let scenario: Scenario;
  let start: number;
  let workspaceId: string;
  let memberToken: string;
  let meteringPort: number;

  const call = async (path: string, token = ADMIN, headers: Record<string, string> = {}) => {
    const res = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${token}`, ...headers } });
    const text = await res.text();
    let body: any = text;
    try {
      body = JSON.parse(text);
    } catch {
      /* CSV */
    }
    return { status: res.status, body, type: res.headers.get('content-type') ?? '' };
  };
  const iso = (ms: number) => new Date(ms).toISOString();

  beforeAll(async () => {
    schema = await createTestSchema('usageapi');
    ns = new Namespace(uniqueName('usageapi'));
    const [mPort, gPort] = [await freePort(), await freePort()];
    base = `http://127.0.0.1:${gPort}`;
    meteringPort = mPort;
    metering = new ServiceProcess(
      'metering',
      testEnv(schema, ns.name, {
        HTTP_PORT: String(mPort),
        METERING_CHECKPOINT_INTERVAL_MS: '200',
        MACHINE_HEARTBEAT_TTL_SECONDS: String(HEARTBEAT_TTL_SECONDS),
      }),
    ).start();
    gateway = new ServiceProcess('gateway', testEnv(schema, ns.name, { HTTP_PORT: String(gPort), BOOTSTRAP_ADMIN_TOKEN: ADMIN })).start();
    await Promise.all([metering.ready(), gateway.ready()]);
    nc = await connectNats({ ...TEST_NATS, name: 'usage-api-test' });
    db = await schemaClient(schema);

    workspaceId = (await call('/api/v1/workspace')).body.id;
    const created = await fetch(`${base}/api/v1/tokens`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'usage-reader' }),
    });
    memberToken = ((await created.json()) as { token: string }).token;

    start = hourFloor(Date.now()) - 6 * HOUR_MS;
    scenario = makeScenario(start, [workspaceId, randomUUID()], 12, 11);
    await placeScenario(db, scenario.containers);
    await publishAll(new Messaging(nc, ns), scenario.events);
    const expectedSeconds = scenario.containers.reduce((sum, c) => sum + (c.end - c.start) / 1000, 0);
    await waitFor(
      'metering to apply the scenario',
      async () => {
        const p = await progress(db);
        return (
          (p.containers === scenario.containers.length && Math.abs(p.closedSeconds - expectedSeconds) < 1e-6 && p.finishedTasks === 36) ||
          undefined
        );
      },
      30_000,
    );
  });

  afterAll(async () => {
    await metering?.stop();
    await gateway?.stop();
    await db?.end();
    await nc?.close();
    await schema?.drop();
    await deleteNamespaces(ns.name);
  });

  // Every scenario container has ended by start + 4 h 42 min.
  const window = () => `from=${iso(start - HOUR_MS)}&to=${iso(start + 5.5 * HOUR_MS)}`;

  it('per machine and per deployment, usage matches the containers’ lifetimes; m-b’s failed tasks are counted', async () => {
    const byMachine = await call(`/api/v1/usage?group_by=machine&${window()}`);
    expect(byMachine.status).toBe(200);
    const truth = expectedUsage(scenario.containers, (c) => c.machineId);
    expect(byMachine.body.rows.map((r: any) => r.group).sort()).toEqual(['m-a', 'm-b']);
    for (const r of byMachine.body.rows) {
      const t = truth.get(r.group)!;
      within1pct(r.containerSeconds, t.seconds);
      within1pct(r.gpuSeconds, t.gpuSeconds);
      within1pct(r.cpuCoreSeconds, t.cpuCoreSeconds);
      within1pct(r.memoryGibSeconds, t.memoryGibSeconds);
    }
    const mb = byMachine.body.rows.find((r: any) => r.group === 'm-b');
    const ma = byMachine.body.rows.find((r: any) => r.group === 'm-a');
    expect(mb.tasksFailed).toBeGreaterThan(0);
    expect(mb.tasksFailed).toBe(scenario.tasks.failed);
    expect(ma.tasksFailed).toBe(0);
    expect(ma.tasksCompleted + mb.tasksCompleted).toBe(scenario.tasks.completed);

    const hourly = await call(`/api/v1/usage?group_by=deployment&granularity=hour&${window()}`);
    const depTruth = expectedUsage(scenario.containers, (c) => c.deploymentId);
    const summed = new Map<string, number>();
    for (const r of hourly.body.rows) {
      expect(Date.parse(r.periodEnd) - Date.parse(r.periodStart)).toBe(HOUR_MS);
      summed.set(r.group, (summed.get(r.group) ?? 0) + r.cpuCoreSeconds);
    }
    expect(summed.size).toBe(2);
    for (const [id, cpu] of summed) within1pct(cpu, depTruth.get(id)!.cpuCoreSeconds);
    // Only placed containers are metered, so every deployment is one the gateway knows.
    expect(hourly.body.rows.filter((r: any) => r.name !== `d-${r.group}`)).toEqual([]);

    const daily = await call(`/api/v1/usage?group_by=gpu&granularity=day&${window()}`);
    expect(new Set(daily.body.rows.map((r: any) => r.group))).toEqual(new Set(['H100', 'none']));
  });

  it('prorates slices cut by the window, and names the workspace', async () => {
    const from = start + HOUR_MS + 17 * 60_000;
    const to = start + 2 * HOUR_MS + 3 * 60_000;
    const res = await call(`/api/v1/usage?group_by=workspace&from=${iso(from)}&to=${iso(to)}`);
    const truth = expectedUsage(scenario.containers, (c) => c.workspaceId, from, to);
    for (const r of res.body.rows) within1pct(r.containerSeconds, truth.get(r.group)!.seconds);
    expect(res.body.rows.find((r: any) => r.group === workspaceId)?.name).toBe('default');
  });

  it('accrues a running container as it runs', async () => {
    const id = `live-${randomUUID().slice(0, 8)}`;
    const startedAt = Date.now() - 60_000;
    const resources = { cpuMillicores: 1000, memoryBytes: 2 ** 30, gpuCount: 2, gpuType: 'H100' };
    const deploymentId = randomUUID();
    await placeScenario(db, [
      { id, machineId: 'm-a', deploymentId, workspaceId, resources, start: startedAt, end: startedAt, ending: 'stopped' },
    ]);
    await new Messaging(nc, ns).publish(CONTAINER_STARTED, {
      containerId: id,
      deploymentId,
      deploymentVersion: 1,
      workspaceId,
      machineId: 'm-a',
      at: iso(startedAt),
      resources,
      startupLatencyMs: 10,
    });
    const seconds = async () =>
      (await db.query(`SELECT COALESCE(SUM(seconds), 0)::float8 AS s FROM usage_intervals WHERE container_id = $1`, [id])).rows[0]
        .s as number;
    await waitFor('the running container to be accrued', async () => (await seconds()) >= 60 || undefined);
    await new Promise((r) => setTimeout(r, 1000));
    const accrued = await seconds();
    const truth = (Date.now() - startedAt) / 1000;
    expect(accrued).toBeGreaterThan(truth - 1.5);
    expect(accrued).toBeLessThanOrEqual(truth + 0.5);
  });

  it('metering exposes Prometheus counters of what it applied and accrued', async () => {
    const text = await (await fetch(`http://127.0.0.1:${meteringPort}/metrics`)).text();
    const value = (line: RegExp) =>
      Number(
        text
          .split('\n')
          .find((l) => line.test(l))
          ?.split(' ')
          .pop(),
      );
    expect(value(/^tern_metering_events_total\{.*kind="container.started"/)).toBeGreaterThanOrEqual(scenario.containers.length);
    expect(value(/^tern_metering_tasks_total\{.*outcome="failed"/)).toBe(scenario.tasks.failed);
    const gpuTruth = [...expectedUsage(scenario.containers, () => 'all').values()][0].gpuSeconds;
    expect(value(/^tern_metering_gpu_seconds_total/)).toBeGreaterThanOrEqual(gpuTruth * 0.99);
    expect(value(/^tern_metering_checkpoints_total/)).toBeGreaterThan(0);
  });

  it('scopes a member to its own workspace', async () => {
    const res = await call(`/api/v1/usage?group_by=deployment&${window()}`, memberToken);
    expect(res.status).toBe(200);
    const own = scenario.containers.filter((c) => c.workspaceId === workspaceId);
    expect(new Set(res.body.rows.map((r: any) => r.group))).toEqual(new Set(own.map((c) => c.deploymentId)));
    expect(res.body.workspace).toBe(workspaceId);
    const other = await call(
      `/api/v1/usage?workspace=${scenario.containers.find((c) => c.workspaceId !== workspaceId)!.workspaceId}`,
      memberToken,
    );
    expect(other.status).toBe(403);
    expect((await call(`/api/v1/usage/rewards?${window()}`, memberToken)).status).toBe(403);
  });

  it('answers CSV on request', async () => {
    const csv = await call(`/api/v1/usage?group_by=machine&format=csv&${window()}`);
    expect(csv.status).toBe(200);
    expect(csv.type).toMatch(/^text\/csv/);
    const lines = String(csv.body).trim().split('\r\n');
    expect(lines[0]).toBe(
      'group,name,period_start,period_end,gpu_seconds,cpu_core_seconds,memory_gib_seconds,container_seconds,tasks_completed,tasks_failed,task_seconds',
    );
    expect(lines).toHaveLength(3);
    const byAccept = await call(`/api/v1/usage?group_by=machine&${window()}`, ADMIN, { accept: 'text/csv' });
    expect(byAccept.body).toBe(csv.body);
  });

  it.each([
    ['from=yesterday', 'from must be an ISO 8601 date'],
    ['to=2026-13-45', 'to must be an ISO 8601 date'],
    ['group_by=color', 'group_by must be one of workspace, deployment, machine, gpu'],
    ['granularity=week', 'granularity must be one of hour, day'],
    ['format=xml', 'format must be one of json, csv'],
    ['from=2026-01-02&to=2026-01-01', 'must be before to'],
    ['from=2020-01-01&to=2026-01-01', 'at most 366 days apart'],
    ['colour=red', 'property colour should not exist'],
  ])('a bad query (%s) is a 400 naming the parameter', async (query, message) => {
    const res = await call(`/api/v1/usage?${query}`);
    expect(res.status).toBe(400);
    expect(JSON.stringify(res.body.message)).toContain(message);
  });

  it('rewards: GPU-seconds weighted by reputation, a machine without a score counts as 1', async () => {
    await db.query(
      `INSERT INTO reputation_scores (machine_id, score, computed_at) VALUES ('m-a', 0.2, $1), ('m-a', 0.5, $2), ('m-a', 0.9, $3)`,
      [
        iso(start - 2 * HOUR_MS),
        iso(start),
        iso(start + 10 * HOUR_MS), // after the period: not used for it
      ],
    );
    const res = await call(`/api/v1/usage/rewards?${window()}&amount=1000`);
    expect(res.status).toBe(200);
    const gpu = expectedUsage(scenario.containers, (c) => c.machineId);
    const weights = { 'm-a': gpu.get('m-a')!.gpuSeconds * 0.5, 'm-b': gpu.get('m-b')!.gpuSeconds * 1 };
    const total = weights['m-a'] + weights['m-b'];
    for (const m of res.body.machines) {
      const w = weights[m.machineId as 'm-a' | 'm-b'];
      expect(m.score).toBe(m.machineId === 'm-a' ? 0.5 : 1);
      within1pct(m.share, w / total);
      within1pct(m.reward, (1000 * w) / total);
    }
    expect(res.body.formula).toContain('score(m)');
    expect((await call(`/api/v1/usage/rewards?amount=-3`)).status).toBe(400);
  });

  it('tern usage and tern usage rewards print the same figures', async () => {
    const env = { ...process.env, TERN_GATEWAY: base, TERN_TOKEN: ADMIN };
    const run = (...args: string[]) => promisify(execFile)(process.execPath, ['bin/tern.js', ...args], { cwd: ROOT, env });
    const json = JSON.parse(
      (await run('usage', '--group-by', 'machine', '--from', iso(start - HOUR_MS), '--to', iso(start + 5.5 * HOUR_MS), '--json')).stdout,
    );
    const api = await call(`/api/v1/usage?group_by=machine&${window()}`);
    expect(json.totals).toEqual(api.body.totals);
    const table = (await run('usage', '--group-by', 'machine', '--from', iso(start - HOUR_MS), '--to', iso(start + 5.5 * HOUR_MS))).stdout;
    expect(table).toMatch(/MACHINE\s+GPU-S/);
    expect(table).toMatch(/^m-b\s/m);
    const rewards = (await run('usage', 'rewards', '--from', iso(start - HOUR_MS), '--to', iso(start + 5.5 * HOUR_MS), '--amount', '100'))
      .stdout;
    expect(rewards).toMatch(/MACHINE\s+GPU-S\s+SCORE\s+SHARE\s+REWARD/);
    await expect(run('usage', '--granularity', 'week')).rejects.toMatchObject({
      stderr: expect.stringContaining('granularity must be one of hour, day'),
    });
  });
});
