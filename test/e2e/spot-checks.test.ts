import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TaskView as ContractTaskView } from '#tern/contracts';
import { AgentProcess, removeStateDir, tempStateDir } from '../agent/harness.js';
import { uniqueName } from '../support/isolation.js';
import { waitFor } from '../support/processes.js';
import { containerInits } from '../support/runners.js';
import { startStack, type Stack } from '../support/stack.js';

/**
 * The same code everywhere; the machine named in the input alters its answer (a machine that
 * returns what it likes for work it holds). Deterministic otherwise, so honest runs agree.
 */
const APP = `import os, time

def run(payload):
    time.sleep(payload.get("seconds", 0))
    square = payload["n"] * payload["n"]
    if os.environ.get("TERN_MACHINE_ID") == payload.get("liar"):
        square += 1
    return {"n": payload["n"], "square": square}
`;

/** A task as the API answers it, its result as this handler returns it. */
type TaskView = Omit<ContractTaskView, 'result'> & { result?: { n: number; square: number } };

/**
 * Spot checks' "done when", with two real agents: with `verify: {sample: 1.0}` and one machine
 * returning altered results, every task that machine ran is flagged (its result disagreed with a
 * verifier of higher reputation), none of the honest machine's is, the tasks' own results and
 * single completions are untouched, and the altering machine's reputation falls.
 */
describe('spot checks of task results with two agents', () => {
  let stack: Stack;
  let liar: AgentProcess | undefined;
  let stateDir: string | undefined;
  const liarId = uniqueName('liar').replace(/_/g, '-');
  const auth = () => ({ authorization: `Bearer ${stack.token}`, 'content-type': 'application/json' });
  const get = async <T>(path: string): Promise<T> => (await (await fetch(`${stack.gateway}${path}`, { headers: auth() })).json()) as T;
  const machine = (id: string) =>
    get<{ state: string; verification: { state: string }; reputation: { score: number } | null }>(`/api/v1/machines/${id}`);

  beforeAll(async () => {
    // Challenged again about every minute: on a loaded host a CPU proof may miss its band once
    // (quarantined), and the next challenge clears it instead of six hours later.
    stack = await startStack('spotcheck', { env: { MACHINE_CHALLENGE_INTERVAL_SECONDS: '60' } });
  }, 180_000);

  afterAll(async () => {
    await liar?.stop();
    if (stateDir) removeStateDir(stateDir);
    await stack?.stop();
  });

  function deploy(containers: number) {
    const dir = stack.scratch('checked');
    writeFileSync(join(dir, 'app.py'), APP);
    writeFileSync(
      join(dir, 'tern.yaml'),
      // 1.5 cores of a 2-core machine: one container per machine. Kept warm briefly, so that the first
      // version's container leaves room for the second's (min_containers keeps the latest running).
      `name: checked\nkind: task_queue\nhandler: app.py:run\nmemory: 128Mi\ncpu: 1.5\nkeep_warm_seconds: 2\nverify:\n  sample: 1.0\nautoscaler:\n  type: queue_depth\n  min_containers: ${containers}\n  max_containers: ${containers}\n`,
    );
    return stack.tern('deploy', join(dir, 'tern.yaml'));
  }

  async function submitAll(inputs: object[]): Promise<TaskView[]> {
    const ids: string[] = [];
    for (const input of inputs) {
      const res = await fetch(`${stack.gateway}/taskqueue/checked`, { method: 'POST', headers: auth(), body: JSON.stringify(input) });
      expect(res.status).toBe(202);
      ids.push(((await res.json()) as { task_id: string }).task_id);
    }
    return Promise.all(
      ids.map(async (id) => {
        for (;;) {
          const t = await get<TaskView>(`/api/v1/tasks/${id}/wait?timeout=20`);
          if (t.done) return t;
        }
      }),
    );
  }

  /** The tasks again once no spot check of theirs is pending any more. */
  function settled(tasks: TaskView[]): Promise<TaskView[]> {
    return waitFor(
      'every spot check settled',
      async () => {
        const now = await Promise.all(tasks.map((t) => get<TaskView>(`/api/v1/tasks/${t.task_id}`)));
        const open = now.filter((t) => !t.spot_check || t.spot_check.state === 'pending');
        if (open.length) throw new Error(`${open.length} of ${now.length} not settled, e.g. ${JSON.stringify(open[0])}`);
        return now;
      },
      60_000,
      500,
    );
  }

  it('flags every altered result, none of the honest ones, and lowers the altering machine', async () => {
    const [honest] = await waitFor(
      'the stack machine ready and verified',
      async () => {
        const ready = (await get<{ id: string; state: string }[]>('/api/v1/machines')).filter((m) => m.state === 'ready');
        if (ready.length !== 1 || (await machine(ready[0].id)).verification.state !== 'verified') throw new Error(JSON.stringify(ready));
        return ready.map((m) => m.id);
      },
      150_000,
      500,
    );

    // Alone, the honest machine earns a record; a check of its results has no verifier: skipped, saying why.
    expect((await deploy(1)).code).toBe(0);
    const alone = await settled(await submitAll(Array.from({ length: 6 }, (_, n) => ({ n, liar: liarId }))));
    for (const t of alone) {
      expect(t).toMatchObject({ status: 'COMPLETE', machine_id: honest, result: { n: expect.any(Number) } });
      expect(t.spot_check).toMatchObject({ state: 'skipped', machine_id: honest, reason: expect.stringMatching(/no other machine/) });
    }

    stateDir = tempStateDir();
    liar = new AgentProcess(stateDir, { AGENT_GATEWAY_URL: stack.gateway, AGENT_TOKEN: stack.token, MACHINE_ID: liarId }).start();
    await liar.joined(90_000);
    await waitFor(
      'the altering machine ready and verified',
      async () => {
        const m = await machine(liarId);
        if (m.state !== 'ready' || m.verification.state !== 'verified') throw new Error(JSON.stringify(m.verification));
        return true;
      },
      150_000,
      500,
    );
    expect((await deploy(2)).code).toBe(0);
    const { deploymentId } = await get<{ deploymentId: string }>('/api/v1/deployments/checked');
    await waitFor(
      'a container of the new version on each machine',
      async () => {
        const machines = new Set(
          containerInits()
            .filter((c) => c.env.TERN_DEPLOYMENT_ID === deploymentId && c.env.TERN_DEPLOYMENT_VERSION === '2')
            .map((c) => c.env.TERN_MACHINE_ID),
        );
        if (machines.size !== 2) throw new Error(`on ${[...machines].join(', ')}`);
        return true;
      },
      120_000,
      250,
    );
    const before = await waitFor(
      'the honest machine scored above the newcomer',
      async () => {
        const [h, l] = [(await machine(honest)).reputation?.score, (await machine(liarId)).reputation?.score];
        if (h === undefined || l === undefined || !(h > l)) throw new Error(`scores: honest ${h}, altering ${l}`);
        return { honest: h, liar: l };
      },
      60_000,
      1000,
    );

    const tasks = await settled(await submitAll(Array.from({ length: 30 }, (_, n) => ({ n, liar: liarId, seconds: 0.2 }))));
    const byLiar = tasks.filter((t) => t.machine_id === liarId);
    const byHonest = tasks.filter((t) => t.machine_id === honest);
    expect(byLiar.length).toBeGreaterThan(0);
    expect(byHonest.length).toBeGreaterThan(0);
    expect(byLiar.length + byHonest.length).toBe(tasks.length);
    for (const t of tasks) {
      // The task's own outcome is untouched: one completion, its result as its lease holder gave it.
      expect(t).toMatchObject({ status: 'COMPLETE', attempts: 1 });
      const n = t.result!.n;
      expect(t.result!.square).toBe(t.machine_id === liarId ? n * n + 1 : n * n);
    }
    for (const t of byLiar) expect(t.spot_check).toMatchObject({ state: 'disagreed', machine_id: liarId, verifier_machine_id: honest });
    for (const t of byLiar) expect(t.spot_check!.verifier_sha256).not.toBe(t.spot_check!.result_sha256);
    // The altering machine scores lower, so it never verifies the honest one: nothing is held against it.
    for (const t of byHonest) expect(t.spot_check).toMatchObject({ state: 'skipped', machine_id: honest, verifier_machine_id: null });

    const shown = await stack.tern('task', 'get', byLiar[0].task_id);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(/disagreed/);

    await waitFor(
      "the altering machine's reputation fell",
      async () => {
        const now = (await machine(liarId)).reputation?.score;
        if (now === undefined || !(now < before.liar)) throw new Error(`altering machine: ${before.liar} → ${now}`);
        return now;
      },
      60_000,
      1000,
    );
    expect((await stack.tern('deployment', 'stop', 'checked')).code).toBe(0);
  }, 600_000);
});
