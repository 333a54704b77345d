import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { AgentProcess, removeStateDir, tempStateDir } from '../agent/harness.js';
import { uniqueName } from '../support/isolation.js';
import { containerInits } from '../support/runners.js';
import { waitFor } from '../support/processes.js';
import { startStack, type Stack } from '../support/stack.js';

/** Fails every odd task on one named machine only: the same code, a worse machine. */
const APP = `import os, time

def run(payload):
    here = os.environ.get("TERN_MACHINE_ID")
    if here == payload.get("bad") and payload["n"] % 2:
        raise RuntimeError(f"odd task on {here}")
    time.sleep(payload.get("seconds", 0))
    return {"n": payload["n"], "machine": here}
`;

const SAMPLE_MS = 100;

interface Lifetime {
  machine: string;
  deployment: string;
  first: number;
  last: number;
}

/**
 * Container lifetimes as the host sees them, independent of Tern's events: the runner
 * processes that are a container's first process, with the machine and deployment from
 * their environment, sampled every SAMPLE_MS.
 */
class LifetimeWatch {
  readonly seen = new Map<number, Lifetime>();
  private timer = setInterval(() => this.sample(), SAMPLE_MS);

  stop() {
    clearInterval(this.timer);
  }

  sample() {
    const inits = containerInits();
    const now = Date.now();
    for (const { pid, env } of inits) {
      const known = this.seen.get(pid);
      if (known) known.last = now;
      else this.seen.set(pid, { machine: env.TERN_MACHINE_ID, deployment: env.TERN_DEPLOYMENT_ID, first: now, last: now });
    }
  }

  /**
   * Seconds they lived. A process is first seen up to one sample after it started and last seen
   * up to one sample before it ended, so one sample interval is added to each: the unbiased estimate.
   */
  seconds(filter: (l: Lifetime) => boolean): number {
    return [...this.seen.values()].filter(filter).reduce((s, l) => s + (l.last - l.first + SAMPLE_MS) / 1000, 0);
  }
}

/**
 * The metering and reputation issue's "done when", with two real agents: usage per machine and
 * per deployment matches the containers' lifetimes within 1 %, the machine that fails half its
 * tasks ends with the lower score, and a deployment whose min_reputation lies between the two
 * scores is never placed on it.
 */
describe('usage and reputation with two agents', () => {
  let stack: Stack;
  let second: AgentProcess;
  let stateDir: string;
  const badMachine = uniqueName('bad').replace(/_/g, '-');
  const auth = () => ({ authorization: `Bearer ${stack.token}`, 'content-type': 'application/json' });
  const get = async <T>(path: string): Promise<T> => (await (await fetch(`${stack.gateway}${path}`, { headers: auth() })).json()) as T;

  beforeAll(async () => {
    stack = await startStack('usagerep');
    stateDir = tempStateDir();
    second = new AgentProcess(stateDir, { AGENT_GATEWAY_URL: stack.gateway, AGENT_TOKEN: stack.token, MACHINE_ID: badMachine }).start();
    await second.joined(90_000);
  }, 180_000);

  afterAll(async () => {
    await second?.stop();
    if (stateDir) removeStateDir(stateDir);
    await stack?.stop();
  });

  function deploy(name: string, spec: string) {
    const dir = stack.scratch(name);
    writeFileSync(join(dir, 'app.py'), APP);
    writeFileSync(join(dir, 'tern.yaml'), `name: ${name}\nhandler: app.py:run\nmemory: 128Mi\n${spec}`);
    return stack.tern('deploy', join(dir, 'tern.yaml'));
  }

  it('meters both machines to the second, scores the failing one lower, and keeps min_reputation work off it', async () => {
    const machines = await waitFor(
      'both machines ready',
      async () => {
        const ready = (await get<{ id: string; state: string }[]>('/api/v1/machines')).filter((m) => m.state === 'ready').map((m) => m.id);
        if (ready.length < 2 || !ready.includes(badMachine)) throw new Error(`ready: ${ready.join(', ')}`);
        return ready;
      },
      60_000,
      500,
    );
    const good = machines.find((m) => m !== badMachine)!;
    const watch = new LifetimeWatch();
    const from = new Date(Date.now() - 60_000).toISOString();
    try {
      // 1.5 cores each on two 2-core machines: one container per machine.
      expect(
        (
          await deploy(
            'mixed',
            'kind: task_queue\ncpu: 1.5\nworkers: 2\nkeep_warm_seconds: 300\ntask_policy:\n  max_retries: 6\nautoscaler:\n  type: queue_depth\n  min_containers: 2\n  max_containers: 2\n',
          )
        ).code,
      ).toBe(0);
      const mixed = await get<{ deploymentId: string }>('/api/v1/deployments/mixed');
      await waitFor(
        'a container on each machine',
        async () => new Set([...watch.seen.values()].filter((l) => l.deployment === mixed.deploymentId).map((l) => l.machine)).size === 2,
        120_000,
        250,
      );

      const ids: string[] = [];
      for (let n = 0; n < 80; n++) {
        const res = await fetch(`${stack.gateway}/taskqueue/mixed`, {
          method: 'POST',
          headers: auth(),
          body: JSON.stringify({ n, bad: badMachine, seconds: 0.1 }),
        });
        ids.push(((await res.json()) as { task_id: string }).task_id);
        // Metering killed mid-run: it resumes from JetStream and loses nothing.
        if (n === 40)
          process.kill(
            (
              JSON.parse(readFileSync(join(String(stack.env.TERN_HOME), 'run.json'), 'utf8')) as {
                services: Record<string, { pid: number }>;
              }
            ).services.metering.pid,
            'SIGKILL',
          );
      }
      const tasks = await Promise.all(
        ids.map(async (id) => {
          for (;;) {
            const t = await get<{ done: boolean; status: string; result?: { machine: string } }>(`/api/v1/tasks/${id}/wait?timeout=20`);
            if (t.done) return t;
          }
        }),
      );
      expect(tasks.filter((t) => t.status === 'COMPLETE').length).toBeGreaterThan(70);
      expect(new Set(tasks.map((t) => t.result?.machine).filter(Boolean))).toEqual(new Set([good, badMachine]));

      const score = async (id: string) => (await get<{ reputation: { score: number } | null }>(`/api/v1/machines/${id}`)).reputation?.score;
      const scores = await waitFor(
        'the failing machine scored lower',
        async () => {
          const [g, b] = [await score(good), await score(badMachine)];
          if (g === undefined || b === undefined || !(b < g)) throw new Error(`scores: good ${g}, failing ${b}`);
          return { g, b };
        },
        60_000,
        1000,
      );

      const between = Number(((scores.g + scores.b) / 2).toFixed(4));
      expect(
        (
          await deploy(
            'picky',
            `kind: endpoint\ncpu: 0.25\nmin_reputation: ${between}\nautoscaler:\n  type: queue_depth\n  min_containers: 2\n  max_containers: 2\n`,
          )
        ).code,
      ).toBe(0);
      const picky = await get<{ deploymentId: string }>('/api/v1/deployments/picky');
      await waitFor('picky running', async () => [...watch.seen.values()].some((l) => l.deployment === picky.deploymentId), 90_000, 250);
      // Long enough that sampling the processes (±0.1 s) stays well inside 1 % of their lifetime.
      await new Promise((r) => setTimeout(r, 20_000));
      const pickyMachines = new Set([...watch.seen.values()].filter((l) => l.deployment === picky.deploymentId).map((l) => l.machine));
      expect(pickyMachines).toEqual(new Set([good]));

      for (const name of ['mixed', 'picky']) expect((await stack.tern('deployment', 'stop', name)).code).toBe(0);
      await waitFor(
        'every container gone',
        async () => {
          watch.sample();
          return [...watch.seen.values()]
            .filter((l) => l.deployment === mixed.deploymentId || l.deployment === picky.deploymentId)
            .every((l) => Date.now() - l.last > 1000);
        },
        60_000,
        250,
      );
    } finally {
      watch.stop();
    }

    const window = `from=${from}&to=${new Date(Date.now() + 60_000).toISOString()}`;
    type Report = { rows: { group: string; containerSeconds: number }[] };
    const within1 = (what: string, metered: number | undefined, real: number) => {
      expect({ what, metered, real, within1: metered !== undefined && Math.abs(metered - real) / real < 0.01 }).toMatchObject({
        what,
        within1: true,
      });
    };
    // Other stacks on this host run containers under the same default machine id: count only this test's deployments.
    const ours = new Set<string>();
    for (const name of ['mixed', 'picky']) ours.add((await get<{ deploymentId: string }>(`/api/v1/deployments/${name}`)).deploymentId);
    const real = (f: (l: Lifetime) => boolean) => watch.seconds((l) => ours.has(l.deployment) && f(l));
    await waitFor(
      'usage closed for every container',
      async () => {
        const report = await get<Report>(`/api/v1/usage?group_by=machine&${window}`);
        const metered = report.rows.find((r) => r.group === good)?.containerSeconds ?? 0;
        const ran = real((l) => l.machine === good);
        if (Math.abs(metered - ran) / ran >= 0.01) throw new Error(`good machine: metered ${metered} s, ran ${ran} s`);
        return true;
      },
      30_000,
      1000,
    );
    const byMachine = await get<Report>(`/api/v1/usage?group_by=machine&${window}`);
    for (const m of [good, badMachine])
      within1(
        m,
        byMachine.rows.find((r) => r.group === m)?.containerSeconds,
        real((l) => l.machine === m),
      );
    const byDeployment = await get<Report>(`/api/v1/usage?group_by=deployment&${window}`);
    for (const id of ours)
      within1(
        id,
        byDeployment.rows.find((r) => r.group === id)?.containerSeconds,
        real((l) => l.deployment === id),
      );

    const badQuery = await fetch(`${stack.gateway}/api/v1/usage?group_by=planet`, { headers: auth() });
    expect(badQuery.status).toBe(400);
    expect(JSON.stringify(await badQuery.json())).toMatch(/group_by/);
  }, 420_000);
});
