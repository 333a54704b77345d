import { appendFileSync, cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { AgentProcess, removeStateDir, tempStateDir } from '../agent/harness.js';
import { expectText, launchChromium, type PageTimings, signIn, timePageLoad } from '../support/browser.js';
import { waitFor } from '../support/processes.js';
import { describeNeeding } from '../support/real-parts.js';
import { startStack, type Stack } from '../support/stack.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** UPDATE_DOCS=1 also writes the screenshots of docs/monitoring.md (docs/dashboard-*.png). */
const DOCS = process.env.UPDATE_DOCS === '1' ? join(ROOT, 'docs') : undefined;
/** DASHBOARD_LOAD=1 times the page loads after nine more machines join and 1,000 more tasks run (the figures in docs/monitoring.md). */
const LOAD = process.env.DASHBOARD_LOAD === '1';

const describeDashboard = await describeNeeding(['root', 'runc', 'umoci', 'chromium']);

/**
 * The dashboard as an operator and as a workspace member see it, in Chromium, against a whole
 * stack with a deployment, a finished task and a machine: each page's figures against the API's.
 */
describeDashboard('the operators dashboard at /ui', () => {
  let stack: Stack;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let member: string;
  let taskId: string;
  const shots = mkdtempSync(join(tmpdir(), 'tern-dashboard-'));

  const api = async <T>(path: string, token = stack.token): Promise<T> => {
    const res = await fetch(`${stack.gateway}${path}`, { headers: { authorization: `Bearer ${token}` } });
    if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
    return (await res.json()) as T;
  };
  const post = async <T>(path: string, body: unknown, token = stack.token): Promise<T> => {
    const res = await fetch(`${stack.gateway}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (res.status >= 300) throw new Error(`${path}: ${res.status} ${await res.text()}`);
    return (await res.json()) as T;
  };
  const shoot = async (name: string, target = page) => {
    await target.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
    if (DOCS) await target.screenshot({ path: join(DOCS, `dashboard-${name}.png`) });
  };
  const open = async (hash: string) => {
    await page.goto(`${stack.gateway}/ui/#/${hash}`);
    await page.locator('.loaded').first().waitFor({ timeout: 60_000 });
  };

  beforeAll(async () => {
    stack = await startStack('dash');
    // The task-queue example, kept warm (its container stays for the logs) and saying what it does.
    const dir = stack.scratch('squares');
    cpSync(join(ROOT, 'examples', 'task-queue'), dir, { recursive: true });
    const spec = readFileSync(join(dir, 'tern.yaml'), 'utf8')
      .replace(/^name:.*$/m, 'name: squares')
      .replace(/^keep_warm_seconds:.*$/m, 'keep_warm_seconds: 600');
    writeFileSync(join(dir, 'tern.yaml'), spec);
    appendFileSync(
      join(dir, 'app.py'),
      '\n\n_square = square\n\n\ndef square(payload):\n    print(f"squaring {payload.get(\'n\')}", flush=True)\n    return _square(payload)\n',
    );
    const deployed = await stack.tern('deploy', join(dir, 'tern.yaml'));
    expect(deployed.code).toBe(0);
    expect((await stack.tern('deploy', join(ROOT, 'examples', 'hello-python', 'tern.yaml'))).code).toBe(0);
    taskId = (await post<{ task_id: string }>('/taskqueue/squares', { n: 7 })).task_id;
    await waitFor(
      'the task to finish',
      async () => (await api<{ done: boolean }>(`/api/v1/tasks/${taskId}/wait?timeout=20`)).done,
      180_000,
      0,
    );
    // A second workspace and a member token of it: sees none of the first one's work.
    const other = await post<{ token: string }>('/api/v1/workspaces', { name: 'elsewhere' });
    member = (await post<{ token: string }>('/api/v1/tokens', { name: 'viewer', role: 'member' }, other.token)).token;
    browser = await launchChromium();
    context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    page = await context.newPage();
  }, 300_000);

  afterAll(async () => {
    await browser?.close();
    await stack?.stop();
  }, 120_000);

  it('signs in with an operator token and shows the overview with the API figures', async () => {
    expect(await signIn(page, stack.gateway, stack.token)).toMatch(/operator/);
    const machines = await api<{ state: string }[]>('/api/v1/machines');
    const deployments = await api<{ state: string; actual: number }[]>('/api/v1/deployments');
    expect(machines.length).toBeGreaterThan(0);
    await expectText(page, 'machines-total', machines.length);
    await expectText(page, 'machines-ready', machines.filter((m) => m.state === 'ready').length);
    await expectText(page, 'deployments-total', deployments.length);
    const stats = await api<{ states: Record<string, number> }>('/api/v1/tasks/stats');
    await expectText(page, 'tasks-COMPLETE', stats.states.COMPLETE);
    await expectText(page, 'tasks-ended', 1);
    const system = await api<{ services: Record<string, { status: string; instances: unknown[] }> }>('/api/v1/system');
    for (const [role, s] of Object.entries(system.services)) {
      const row = page.getByTestId('services').locator('tbody tr', { has: page.locator(`td[data-label=service]:text-is("${role}")`) });
      expect(await row.locator('td[data-label=status]').allTextContents()).toEqual(s.instances.map(() => s.status));
    }
    // Good news green, bad news red: the legend's swatches are the lines' colours.
    const swatch = (label: string) =>
      page
        .getByTestId('task-rate-chart')
        .locator('.legend li', { hasText: label })
        .locator('.swatch')
        .evaluate(
          (e) =>
            (globalThis as unknown as { getComputedStyle(e: unknown): { backgroundColor: string } }).getComputedStyle(e).backgroundColor,
        );
    expect(await swatch('completed / s')).toBe('rgb(22, 163, 74)');
    expect(await swatch('failed / s')).toBe('rgb(220, 38, 38)');
    await shoot('overview');
  }, 180_000);

  it('lists the machines and opens one: inventory, reputation, containers, usage', async () => {
    const [machine] = await api<{ id: string; gpus: unknown[] }[]>('/api/v1/machines');
    await open('machines');
    await expect(page.locator(`[data-testid=machines] tr[data-key="${machine.id}"]`).count()).resolves.toBe(1);
    await shoot('machines');
    await page.locator(`a[href="#/machines/${machine.id}"]`).click();
    await page.getByTestId('inventory').waitFor();
    await expectText(page, 'gpu-count', machine.gpus.length);
    // State changes, as the trigger on machines kept them: at least pending or registered → ready.
    const states = await api<{ changes: { to: string }[] }>(`/api/v1/machines/${machine.id}/state-changes`);
    expect(states.changes.map((c) => c.to)).toContain('ready');
    await waitFor(
      'the state changes listed',
      async () => (await page.locator('[data-testid=state-change-table] tbody tr').count()) === states.changes.length,
    );
    // The queue's warm container, once a heartbeat has listed it (heartbeats lag a start by seconds).
    const running = await waitFor(
      'a running container in a heartbeat',
      async () => {
        const detail = await api<{ heartbeat: { runningContainers: string[] } }>(`/api/v1/machines/${machine.id}`);
        return detail.heartbeat.runningContainers.length ? detail.heartbeat.runningContainers : undefined;
      },
      60_000,
    );
    await waitFor('the running container listed', async () =>
      (await page.getByTestId('running-containers').textContent())?.includes(running[0]),
    );
    const reputation = await api<{ score: number | null }>(`/api/v1/machines/${machine.id}/reputation`);
    if (reputation.score !== null) await expectText(page, 'score', reputation.score.toLocaleString('en-US', { maximumFractionDigits: 3 }));
    await page.getByTestId('machine-usage').locator('.figure').first().waitFor();
    await shoot('machine');
  }, 180_000);

  it('lists the deployments, opens one with its containers and follows its live logs', async () => {
    await open('deployments');
    // Both deployments' counts as the API has them now (hello scales to zero while we look).
    for (const name of ['squares', 'hello']) {
      const row = page.locator(`[data-testid=deployments] tr[data-key="${name}"] [data-testid=desired-actual]`);
      await waitFor(
        `${name} desired / actual`,
        async () => {
          const d = (await api<{ name: string; desired: number; actual: number }[]>('/api/v1/deployments')).find((x) => x.name === name)!;
          return (await row.textContent()) === `${d.desired} / ${d.actual}`;
        },
        30_000,
        500,
      );
    }
    await shoot('deployments');
    await page.locator('a[href="#/deployments/squares"]').click();
    await page.getByTestId('container-table').waitFor({ timeout: 30_000 });
    const detail = await api<{ containers: { id: string; machineId: string }[] }>('/api/v1/deployments/squares');
    for (const c of detail.containers) expect(await page.locator(`[data-testid=container-table] tr[data-key="${c.id}"]`).count()).toBe(1);
    // Scaling: the autoscaler's decisions as the API lists them (at least 0 → 1 for the first task).
    const scaling = await api<{ events: unknown[]; series: { ready: number }[] }>('/api/v1/deployments/squares/scale-events');
    expect(scaling.events.length).toBeGreaterThan(0);
    await waitFor(
      'the scale events listed',
      async () => (await page.locator('[data-testid=scale-events] tbody tr').count()) >= scaling.events.length,
      30_000,
    );
    expect(scaling.series.at(-1)!.ready).toBe(detail.containers.length);
    await expectText(page, 'logs-status', 'following');
    // A task submitted now writes a line while the page follows.
    const followed = (await post<{ task_id: string }>('/taskqueue/squares', { n: 12 })).task_id;
    await waitFor(
      'the live log line',
      async () => (await page.getByTestId('log-lines').textContent())?.includes('squaring 12'),
      90_000,
      250,
    );
    await api(`/api/v1/tasks/${followed}/wait?timeout=30`);
    await shoot('deployment');
  }, 180_000);

  it("shows an endpoint's requests per minute and latency as the API counts them", async () => {
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${stack.gateway}/endpoint/hello`, {
        method: 'POST',
        headers: { authorization: `Bearer ${stack.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: `n${i}` }),
        signal: AbortSignal.timeout(120_000),
      });
      expect(res.status).toBe(200);
    }
    const total = async () =>
      (await api<{ series: { requests: number; p50: number | null }[] }>('/api/v1/deployments/hello/requests')).series;
    // Each gateway adds its counts every few seconds.
    await waitFor('the requests stored', async () => (await total()).reduce((n, p) => n + p.requests, 0) === 3, 30_000, 500);
    expect((await total()).some((p) => p.p50 !== null && p.p50 > 0)).toBe(true);
    await open('deployments/hello');
    await expectText(page, 'requests-total', 3);
    await expectText(page, 'requests-errors', 0);
    await page.getByTestId('latency-chart').waitFor();
    await shoot('endpoint');
  }, 240_000);

  it('filters tasks by queue and state and shows one with its result', async () => {
    await open('tasks');
    await page.locator('select[name=queue]').selectOption('squares');
    await page.locator('select[name=state]').selectOption('COMPLETE');
    const listed = await api<{ tasks: { task_id: string }[] }>('/api/v1/tasks?deployment=squares&status=COMPLETE&limit=100');
    await waitFor('the filtered list', async () => (await page.locator('[data-testid=tasks] tbody tr').count()) === listed.tasks.length);
    await shoot('tasks');
    await page.locator(`a[href="#/tasks/${taskId}"]`).click();
    const task = await api<{ status: string; attempts: number; result: unknown }>(`/api/v1/tasks/${taskId}`);
    await expectText(page, 'task-status', task.status);
    await expectText(page, 'task-attempts', `${task.attempts} (retries allowed: 3)`);
    expect(JSON.parse((await page.getByTestId('task-outcome').textContent()) ?? '')).toEqual(task.result);
    await shoot('task');
  }, 180_000);

  it('charts usage, matches the API totals and downloads the CSV', async () => {
    await open('usage');
    const to = new Date(Math.ceil(Date.now() / 3600_000) * 3600_000);
    const from = new Date(to.getTime() - 24 * 3600_000);
    const window = `from=${encodeURIComponent(from.toISOString())}&to=${encodeURIComponent(to.toISOString())}`;
    await waitFor(
      'tasks completed as metering counts them',
      async () => {
        const report = await api<{ totals: { tasksCompleted: number } }>(`/api/v1/usage?group_by=deployment&${window}`);
        const shown = (await page.getByTestId('total-tasks-completed').textContent())?.trim();
        return report.totals.tasksCompleted >= 2 && shown === String(report.totals.tasksCompleted);
      },
      60_000,
      500,
    );
    const download = page.waitForEvent('download');
    await page.getByTestId('csv').click();
    const csv = readFileSync((await (await download).path())!, 'utf8');
    expect(csv.split('\n')[0]).toMatch(/gpuSeconds|gpu_seconds/i);
    expect(csv).toContain('squares');
    await page.getByTestId('rewards').locator('table').waitFor();
    await shoot('usage');
  }, 180_000);

  it('fits a phone width', async () => {
    const phone = await context.newPage();
    await phone.setViewportSize({ width: 390, height: 844 });
    // The token lives in one tab's session storage: a new tab signs in again.
    await signIn(phone, stack.gateway, stack.token);
    await phone.goto(`${stack.gateway}/ui/#/machines`);
    await phone.locator('.loaded').first().waitFor({ timeout: 60_000 });
    expect(await phone.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    await shoot('phone', phone);
    await phone.close();
  }, 180_000);

  it('shows a workspace member only its own workspace', async () => {
    const memberContext = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const view = await memberContext.newPage();
    expect(await signIn(view, stack.gateway, member)).toMatch(/elsewhere · member/);
    const machines = await api<unknown[]>('/api/v1/machines', member);
    const deployments = await api<unknown[]>('/api/v1/deployments', member);
    expect(deployments).toEqual([]);
    await expectText(view, 'deployments-total', 0);
    await expectText(view, 'machines-total', machines.length);
    await expect(view.getByTestId('task-rates').locator('[data-testid^=tasks-COMPLETE]').count()).resolves.toBe(0);
    for (const hash of ['deployments', 'tasks', 'machines']) {
      await view.goto(`${stack.gateway}/ui/#/${hash}`);
      await view.locator('.loaded').first().waitFor({ timeout: 60_000 });
      expect(await view.locator('main').textContent()).not.toContain('squares');
    }
    await view.goto(`${stack.gateway}/ui/#/deployments/squares`);
    await expect(view.getByRole('alert').textContent({ timeout: 30_000 })).resolves.toMatch(/not found|404/i);
    await view.goto(`${stack.gateway}/ui/#/tasks/${taskId}`);
    await expect(view.getByRole('alert').textContent({ timeout: 30_000 })).resolves.toMatch(/not found|404/i);
    await view.goto(`${stack.gateway}/ui/#/usage`);
    await expectText(view, 'total-tasks-completed', 0);
    await shoot('member', view);
    await memberContext.close();
  }, 180_000);

  it(`loads each page: first paint and data loaded${LOAD ? ' (1,000 tasks, 10 machines)' : ''}`, async () => {
    const extra: AgentProcess[] = [];
    try {
      if (LOAD) {
        // Nine more machines joining with the operator token, then 1,000 tasks spread over them.
        for (let i = 0; i < 9; i++)
          extra.push(
            new AgentProcess(tempStateDir(), {
              AGENT_GATEWAY_URL: stack.gateway,
              AGENT_TOKEN: stack.token,
              MACHINE_ID: `load-${i + 2}`,
            }).start(),
          );
        await Promise.all(extra.map((a) => a.joined(300_000)));
        const ids: string[] = [];
        for (let i = 0; i < 1000; i += 50) {
          const batch = Array.from({ length: Math.min(50, 1000 - i) }, (_, k) =>
            post<{ task_id: string }>('/taskqueue/squares', { n: i + k }),
          );
          ids.push(...(await Promise.all(batch)).map((t) => t.task_id));
        }
        await waitFor(
          'the 1,000 tasks to finish',
          async () => (await api<{ states: Record<string, number> }>('/api/v1/tasks/stats')).states.COMPLETE! >= ids.length,
          600_000,
          2000,
        );
        expect((await api<unknown[]>('/api/v1/machines')).length).toBe(10);
      }
      const [machine] = await api<{ id: string }[]>('/api/v1/machines');
      const timings: Record<string, PageTimings> = {};
      for (const hash of ['overview', 'machines', `machines/${machine.id}`, 'deployments', 'deployments/squares', 'tasks', 'usage']) {
        timings[hash] = await timePageLoad(page, `${stack.gateway}/ui/#/${hash}`);
      }
      writeFileSync(join(shots, 'timings.json'), JSON.stringify(timings, null, 2));
      process.stdout.write(`dashboard page loads (ms since navigation; screenshots in ${shots}):\n${JSON.stringify(timings, null, 2)}\n`);
      for (const t of Object.values(timings)) expect(t.dataLoadedMs).toBeLessThan(15_000);
    } finally {
      await Promise.all(extra.map((a) => a.stop()));
      for (const a of extra) removeStateDir(a.stateDir);
    }
  }, 1_200_000);
});
