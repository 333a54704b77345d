import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startStack, type Stack } from '../support/stack.js';

const EXAMPLES = fileURLToPath(new URL('../../examples', import.meta.url));
/** Machine JWTs, and so task permits, live this long: the queue below outlives several. */
const TTL_S = 12;

/**
 * Task permits over their lifetime: the agent pulls a queue's tasks through a permit that lives
 * TTL_S, renews it at two thirds of that and reconnects with the new one when the server ends the
 * old connection; a queue kept busy for several lifetimes completes every task.
 */
describe('task permits renewed while a queue runs', () => {
  let stack: Stack;

  beforeAll(async () => {
    stack = await startStack('permits', { env: { MACHINE_NATS_JWT_TTL_SECONDS: String(TTL_S) } });
  }, 120_000);

  afterAll(async () => {
    await stack?.stop();
  });

  it('completes every task submitted over several permit lifetimes', async () => {
    const dir = stack.scratch('permits');
    cpSync(join(EXAMPLES, 'task-queue'), dir, { recursive: true });
    const spec = readFileSync(join(dir, 'tern.yaml'), 'utf8')
      .replace(/^name:.*$/m, 'name: permits')
      .replace(/^keep_warm_seconds:.*$/m, 'keep_warm_seconds: 120');
    writeFileSync(join(dir, 'tern.yaml'), spec);
    expect((await stack.tern('deploy', join(dir, 'tern.yaml'))).code).toBe(0);

    const headers = { authorization: `Bearer ${stack.token}`, 'content-type': 'application/json' };
    const ids: string[] = [];
    const until = Date.now() + 3.5 * TTL_S * 1000;
    for (let n = 0; Date.now() < until; n++) {
      const res = await fetch(`${stack.gateway}/taskqueue/permits`, { method: 'POST', headers, body: JSON.stringify({ n, seconds: 0.2 }) });
      expect(res.status).toBe(202);
      ids.push(((await res.json()) as { task_id: string }).task_id);
      await new Promise((r) => setTimeout(r, 500));
    }
    const done = await Promise.all(
      ids.map(async (id) => {
        for (const deadline = Date.now() + 180_000; ;) {
          const res = await fetch(`${stack.gateway}/api/v1/tasks/${id}/wait?timeout=20`, { headers });
          const task = (await res.json()) as { status: string; done: boolean; result?: { n: number; square: number } };
          if (task.done || Date.now() > deadline) return task;
        }
      }),
    );
    expect(done.filter((t) => t.status !== 'COMPLETE')).toEqual([]);
    done.forEach((t, n) => expect(t.result).toMatchObject({ n, square: n * n }));
    // The permit's connection was ended at expiry and came back with a renewed JWT, more than once.
    const permitRecords = readFileSync(join(String(stack.env.TERN_HOME), 'logs', 'agent.log'), 'utf8')
      .split('\n')
      .flatMap((line) => {
        try {
          return [JSON.parse(line) as { context?: string; msg?: string }];
        } catch {
          return [];
        }
      })
      .filter((r) => r.context === 'tasks');
    expect(permitRecords.filter((r) => r.msg?.startsWith('connected to') && r.msg.includes('-tasks-')).length).toBeGreaterThanOrEqual(1);
    expect(permitRecords.filter((r) => r.msg?.startsWith('reconnected to NATS')).length).toBeGreaterThanOrEqual(2);
  }, 300_000);
});
