import type pg from 'pg';
import { randomUUID } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import { TASK_ATTEMPT_ENDED, TASK_ATTEMPTS_ENDED, TASK_COMPLETED, TASK_COMPLETED_MANY, TASK_FAILED, TASK_STARTED } from '#tern/contracts';
import type { Messaging, Namespace } from '#tern/messaging';
import { waitFor } from '../support/processes.js';
import { TaskLedger } from '../support/task-ledger.js';

/**
 * The gateway's task state machine, fed real events over JetStream in the orders and
 * repetitions at-least-once delivery produces: a final state is never left, the first
 * completion wins, an old attempt's event never overwrites a newer attempt.
 */
describe('task ledger (gateway)', () => {
  let ledger: TaskLedger;
  let nc: NatsConnection;
  let ns: Namespace;
  let messaging: Messaging;
  let db: pg.Client;
  let workspaceId: string;
  let deploymentId: string;

  beforeAll(async () => {
    // The placements the scheduler would have made: c-1 on m-1, c-2 on m-2.
    ledger = await TaskLedger.start('ledger', { 'm-1': 'c-1', 'm-2': 'c-2' });
    ({ nc, messaging, db, workspaceId, deploymentId, ns } = ledger);
  });

  afterAll(async () => {
    await ledger?.stop();
  });

  const task = () => ledger.task();
  const row = (id: string) => ledger.row(id);
  const base = (taskId: string, machineId = 'm-1') => ({
    taskId,
    deploymentId,
    deploymentVersion: 1,
    workspaceId,
    containerId: machineId === 'm-1' ? 'c-1' : 'c-2',
    machineId,
  });
  const started = (id: string, attempt: number, machineId = 'm-1') =>
    messaging.publish(TASK_STARTED, { ...base(id, machineId), attempt, startedAt: new Date().toISOString() });
  const completed = (id: string, attempt: number, result: unknown, machineId = 'm-1') =>
    messaging.publish(TASK_COMPLETED, { ...base(id, machineId), attempt, durationMs: 5, result, completedAt: new Date().toISOString() });
  const failed = (id: string, attempt: number, willRetry: boolean, cause: 'error' | 'timeout' | 'container-lost' = 'error') =>
    messaging.publish(TASK_FAILED, {
      ...base(id),
      attempt,
      cause,
      error: `boom ${attempt}`,
      willRetry,
      failedAt: new Date().toISOString(),
    });
  const settled = (id: string, state: string) => waitFor(`task ${state}`, async () => (await row(id)).state === state, 10_000, 100);

  it('follows started → failed (retry) → started → completed', async () => {
    const id = await task();
    await started(id, 1);
    await settled(id, 'RUNNING');
    await failed(id, 1, true);
    await settled(id, 'RETRY');
    await started(id, 2);
    await settled(id, 'RUNNING');
    await completed(id, 2, { ok: true });
    await settled(id, 'COMPLETE');
    expect(await row(id)).toMatchObject({ state: 'COMPLETE', attempts: 2, result: { ok: true }, error: null });
  });

  it('keeps the first completion: a second one (the task ran twice) changes nothing', async () => {
    const id = await task();
    // The completion may overtake its start (one consumer per subject): it waits for the lease.
    await completed(id, 1, { first: true }, 'm-1');
    await started(id, 1);
    await settled(id, 'COMPLETE');
    await started(id, 2, 'm-2');
    await completed(id, 2, { second: true }, 'm-2');
    await failed(id, 2, false);
    await new Promise((r) => setTimeout(r, 1000));
    expect(await row(id)).toMatchObject({ state: 'COMPLETE', result: { first: true }, machine_id: 'm-1' });
  });

  it('ignores an older attempt that reports after a newer one started, and a start after the end', async () => {
    const id = await task();
    await started(id, 2);
    await settled(id, 'RUNNING');
    await failed(id, 1, true);
    await new Promise((r) => setTimeout(r, 800));
    expect(await row(id)).toMatchObject({ state: 'RUNNING', attempts: 2 });
    await failed(id, 2, false, 'timeout');
    await settled(id, 'TIMEOUT');
    await started(id, 3);
    await new Promise((r) => setTimeout(r, 800));
    expect(await row(id)).toMatchObject({ state: 'TIMEOUT', attempts: 2, error: 'timeout: boom 2' });
  });

  it('reports an attempt that never reported as lost on its own machine when the next one starts', async () => {
    const id = await task();
    const seen: { attempt: number; cause: string; machineId?: string; willRetry: boolean }[] = [];
    const sub = nc.subscribe(messaging.subject(TASK_FAILED), {
      callback: (_e, msg) => {
        const f = msg.json<{ taskId: string; attempt: number; cause: string; machineId?: string; willRetry: boolean }>();
        if (f.taskId === id) seen.push(f);
      },
    });
    try {
      await started(id, 1);
      await settled(id, 'RUNNING');
      await started(id, 2, 'm-2');
      await waitFor('the lost attempt reported', async () => seen.length > 0, 10_000, 100);
      expect(seen).toEqual([expect.objectContaining({ attempt: 1, cause: 'container-lost', machineId: 'm-1', willRetry: true })]);
      expect(await row(id)).toMatchObject({ state: 'RUNNING', attempts: 2, machine_id: 'm-2' });
    } finally {
      sub.unsubscribe();
    }
  });

  it('sends a task whose gateway died between saving and publishing it', async () => {
    const id = randomUUID();
    await db.query(
      `INSERT INTO tasks (id, workspace_id, deployment_id, state, payload, max_retries, timeout_seconds, created_at) VALUES ($1, $2, $3, 'PENDING', '{"n": 1}', 3, 60, now() - interval '10 seconds')`,
      [id, workspaceId, deploymentId],
    );
    const sent = await waitFor(
      'the sweep to send it',
      async () => (await db.query(`SELECT stream_seq FROM tasks WHERE id = $1 AND enqueued_at IS NOT NULL`, [id])).rows[0],
      15_000,
      200,
    );
    const jsm = await messaging.jsm();
    const msg = await jsm.streams.getMessage(ns.stream('TASKS'), { seq: Number(sent.stream_seq) });
    expect(msg?.json<{ taskId: string; payload: unknown }>()).toMatchObject({ taskId: id, payload: { n: 1 } });
  });

  it('ends ERROR when a machine placed for the task is handed it past its last attempt', async () => {
    const id = await task();
    await failed(id, 4, false, 'container-lost');
    await settled(id, 'ERROR');
    expect((await row(id)).error).toMatch(/container-lost: boom 4/);
  });

  it('records each member of a task.completed-many once, refuses a member naming another machine, and tells the facts together', async () => {
    const [a, b, c] = [await task(), await task(), await task()];
    const facts: { taskId: string; attempt: number }[][] = [];
    const lone = nc.subscribe(messaging.subject(TASK_ATTEMPT_ENDED), {
      callback: (_e, msg) => {
        facts.push([msg.json<{ taskId: string; attempt: number }>()]);
      },
    });
    const many = nc.subscribe(messaging.subject(TASK_ATTEMPTS_ENDED), {
      callback: (_e, msg) => {
        facts.push(msg.json<{ attempts: { taskId: string; attempt: number }[] }>().attempts);
      },
    });
    const member = (id: string, result: unknown, machineId = 'm-1') => ({
      ...base(id, machineId),
      attempt: 1,
      durationMs: 5,
      result,
      completedAt: new Date().toISOString(),
      withStart: true,
    });
    const send = (completions: ReturnType<typeof member>[], msgId: string) =>
      messaging.publish(TASK_COMPLETED_MANY, { machineId: 'm-1', completions }, { msgId });
    try {
      // c's member claims m-2's container: m-1 sent the message, so it is not believed.
      await send([member(a, { n: 'a' }), member(b, { n: 'b' }), member(c, { n: 'c' }, 'm-2')], 'many-1');
      await settled(a, 'COMPLETE');
      await settled(b, 'COMPLETE');
      expect(await row(a)).toMatchObject({ result: { n: 'a' }, attempts: 1, machine_id: 'm-1' });
      expect(await row(b)).toMatchObject({ result: { n: 'b' }, attempts: 1, machine_id: 'm-1' });
      // Sent again with other results (a republish after a lost answer): one completion per task stays the rule.
      await send([member(a, { n: 'again' }), member(b, { n: 'again' })], 'many-2');
      await waitFor('the facts', async () => facts.flat().filter((f) => f.taskId === a || f.taskId === b).length >= 2, 10_000, 100);
      await new Promise((r) => setTimeout(r, 800));
      expect(await row(a)).toMatchObject({ result: { n: 'a' } });
      expect(await row(c)).toMatchObject({ state: 'PENDING', machine_id: null });
      const told = facts.flat().filter((f) => [a, b, c].includes(f.taskId));
      expect(told.map((f) => `${f.taskId === a ? 'a' : f.taskId === b ? 'b' : 'c'}:${f.attempt}`).sort()).toEqual(
        expect.arrayContaining(['a:1', 'b:1']),
      );
      expect(told.some((f) => f.taskId === c)).toBe(false);
    } finally {
      lone.unsubscribe();
      many.unsubscribe();
    }
  });
});
