import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { freePort, waitFor } from '../support/processes.js';
import { describeNeeding } from '../support/real-parts.js';
import { startStack, type Stack } from '../support/stack.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const ALERTS = join(ROOT, 'deploy', 'prometheus', 'alerts.yml');
const DASHBOARD = join(ROOT, 'deploy', 'grafana', 'dashboards', 'tern.json');

/** What the issue asks every operator to have, by the series that carry it. */
const LISTED = {
  'request rate per route': 'tern_http_requests_total',
  'latency per route': 'tern_http_request_duration_seconds_bucket',
  'latency per deployment': 'tern_endpoint_request_duration_seconds_bucket',
  'queue depth per queue': 'tern_task_queue_depth',
  'containers desired and ready': 'tern_deployment_containers',
  'scale decisions': 'tern_autoscaler_scale_decisions_total',
  'heartbeat lag': 'tern_machine_heartbeat_interval_seconds_bucket',
  'placement failures by reason': 'tern_placement_failures_total',
  'NATS reconnects': 'tern_nats_connection_events_total',
  'Postgres pool use': 'tern_postgres_pool_connections',
  'machines by state': 'tern_machines',
};

const describePrometheus = await describeNeeding(['root', 'runc', 'umoci', 'prometheus']);

/**
 * Debian's Prometheus scrapes a whole stack (with an endpoint, a task queue and a machine at
 * work) with deploy/prometheus's rules: the listed series exist on the services that own them,
 * every Grafana query names only series that exist, and every alert rule loads and evaluates.
 */
describePrometheus('Prometheus and Grafana against a running stack', () => {
  let stack: Stack;
  let prometheus: ChildProcess;
  let base: string;
  let log = '';

  const query = async <T>(path: string): Promise<T> => {
    const res = await fetch(`${base}${path}`);
    const body = (await res.json()) as { status: string; data: T; error?: string };
    if (body.status !== 'success') throw new Error(`${path}: ${body.error}`);
    return body.data;
  };
  const series = (match: string) => query<Record<string, string>[]>(`/api/v1/series?match[]=${encodeURIComponent(match)}`);

  beforeAll(async () => {
    stack = await startStack('prom');
    const auth = { authorization: `Bearer ${stack.token}` };
    // Work for the series to describe: a task queue with a finished task and an endpoint answered once.
    const queue = stack.scratch('squares');
    cpSync(join(ROOT, 'examples', 'task-queue'), queue, { recursive: true });
    writeFileSync(join(queue, 'tern.yaml'), readFileSync(join(queue, 'tern.yaml'), 'utf8').replace(/^name:.*$/m, 'name: squares'));
    expect((await stack.tern('deploy', join(queue, 'tern.yaml'))).code).toBe(0);
    expect((await stack.tern('deploy', join(ROOT, 'examples', 'hello-python', 'tern.yaml'))).code).toBe(0);
    const submitted = await fetch(`${stack.gateway}/taskqueue/squares`, { method: 'POST', headers: auth, body: '{"n": 3}' });
    const { task_id } = (await submitted.json()) as { task_id: string };
    const answered = await fetch(`${stack.gateway}/endpoint/hello`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: '{"name":"Ada"}',
      signal: AbortSignal.timeout(120_000),
    });
    expect(answered.status).toBe(200);
    await waitFor(
      'the task to finish',
      async () =>
        ((await (await fetch(`${stack.gateway}/api/v1/tasks/${task_id}/wait?timeout=20`, { headers: auth })).json()) as { done: boolean })
          .done,
      120_000,
      0,
    );

    // Every service of the stack as a target (the ports `npm run up` chose), with the shipped rules.
    const ports = JSON.parse(readFileSync(join(String(stack.env.TERN_HOME), 'state.json'), 'utf8')).ports as Record<string, number>;
    const dir = stack.scratch('prometheus');
    const config = join(dir, 'prometheus.yml');
    writeFileSync(
      config,
      JSON.stringify({
        global: { scrape_interval: '1s', evaluation_interval: '1s' },
        rule_files: [ALERTS],
        scrape_configs: [{ job_name: 'tern', static_configs: [{ targets: Object.values(ports).map((p) => `127.0.0.1:${p}`) }] }],
      }),
    );
    execFileSync('promtool', ['check', 'config', config]);
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    prometheus = spawn(
      'prometheus',
      [`--config.file=${config}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    prometheus.stdout!.on('data', (d) => (log += d));
    prometheus.stderr!.on('data', (d) => (log += d));
    await waitFor('Prometheus ready', async () => (await fetch(`${base}/-/ready`)).ok, 60_000, 250).catch((e: Error) => {
      throw new Error(`${e.message}\n${log}`);
    });
    await waitFor(
      'every service scraped',
      async () => {
        const { activeTargets } = await query<{ activeTargets: { health: string }[] }>('/api/v1/targets');
        return activeTargets.length === Object.keys(ports).length && activeTargets.every((t) => t.health === 'up');
      },
      60_000,
      500,
    );
  }, 420_000);

  afterAll(async () => {
    prometheus?.kill('SIGTERM');
    await stack?.stop();
  }, 120_000);

  it('the alert rules pass promtool', () => {
    expect(execFileSync('promtool', ['check', 'rules', ALERTS], { encoding: 'utf8' })).toMatch(/SUCCESS: \d+ rules found/);
  });

  it.each(Object.entries(LISTED))('finds %s (%s)', async (_what, name) => {
    await waitFor(`${name} scraped`, async () => (await series(name)).length > 0, 60_000, 500);
  });

  it('finds each series on the service that owns it', async () => {
    const servicesOf = async (name: string) => new Set((await series(name)).map((s) => s.service));
    await waitFor('every service answering HTTP', async () => (await servicesOf('tern_http_requests_total')).size === 6, 30_000, 500);
    expect([...(await servicesOf('tern_http_requests_total'))].sort()).toEqual(
      ['agent', 'autoscaler', 'gateway', 'metering', 'reputation', 'scheduler'].sort(),
    );
    expect([...(await servicesOf('tern_postgres_pool_connections'))].sort()).toEqual(['gateway', 'metering', 'reputation', 'scheduler']);
    expect([...(await servicesOf('tern_nats_connection_events_total'))].length).toBe(6);
    const endpoint = await series('tern_endpoint_request_duration_seconds_count{deployment="hello"}');
    expect(endpoint.map((s) => s.status)).toContain('200');
    const containers = await series('tern_deployment_containers{deployment="squares"}');
    expect(new Set(containers.map((s) => s.state))).toEqual(new Set(['desired', 'ready']));
    const decisions = await series('tern_autoscaler_scale_decisions_total{deployment="squares",direction="up"}');
    expect(decisions.length).toBe(1);
    const ready = await query<{ result: { value: [number, string] }[] }>(
      `/api/v1/query?query=${encodeURIComponent('sum(tern_machines{state="ready"})')}`,
    );
    expect(Number(ready.result[0].value[1])).toBe(1);
  });

  it('every query of the Grafana dashboard runs and names only series that exist', async () => {
    const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as { panels: { title: string; targets?: { expr: string }[] }[] };
    const exprs = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })));
    expect(exprs.length).toBeGreaterThan(20);
    const missing: string[] = [];
    for (const { panel, expr } of exprs) {
      await query(`/api/v1/query?query=${encodeURIComponent(expr)}`);
      for (const name of new Set(expr.match(/\b(tern_[a-z0-9_]+|up)\b(?=\s*[{[)]|\s*$)/g) ?? [])) {
        if (!(await series(name)).length) missing.push(`${panel}: ${name}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it('loads every alert rule, which evaluates without error', async () => {
    const shipped = (parse(readFileSync(ALERTS, 'utf8')) as { groups: { rules: { alert: string }[] }[] }).groups.flatMap((g) =>
      g.rules.map((r) => r.alert),
    );
    await waitFor(
      'every rule evaluated',
      async () => {
        const { groups } = await query<{ groups: { rules: { name: string; health: string; lastError?: string }[] }[] }>('/api/v1/rules');
        const rules = groups.flatMap((g) => g.rules);
        const bad = rules.filter((r) => r.health === 'err');
        if (bad.length) throw new Error(`rules failing: ${bad.map((r) => `${r.name}: ${r.lastError}`).join('; ')}`);
        return (
          rules.length === shipped.length &&
          rules.every((r) => r.health === 'ok') &&
          rules
            .map((r) => r.name)
            .sort()
            .join() === [...shipped].sort().join()
        );
      },
      30_000,
      500,
    );
    expect(log).not.toMatch(/level=error/i);
  });
});
