import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { Deployment, Task, type TaskWithDeployment, TasksRepository, Workspace } from '#tern/persistence';
import { againstIdOrderedLocks, migratedDatabase } from '../support/database.js';

const database = migratedDatabase('tasksrepo');
let db: DataSource;
let tasks: TasksRepository;
let workspaceId: string;
let deploymentId: string;

beforeAll(async () => {
  db = database.db;
  tasks = new TasksRepository(db);
  workspaceId = (await db.getRepository(Workspace).save({ name: 'tasks' })).id;
  deploymentId = (
    await db.getRepository(Deployment).save({ workspaceId, name: 'queue', kind: 'task_queue', state: 'ready', latestVersion: 1 })
  ).id;
});

const newTask = (over: Partial<Parameters<TasksRepository['createPending']>[0]> = {}) => ({
  id: randomUUID(),
  workspaceId,
  deploymentId,
  version: 1,
  payload: { n: 1 },
  maxRetries: 3,
  timeoutSeconds: 60,
  ttlSeconds: null,
  callbackUrl: null,
  ...over,
});

/** A task row in any state, on its own deployment unless one is given. */
async function task(over: Partial<Task> = {}, ageSeconds = 0): Promise<Task> {
  const saved = await db
    .getRepository(Task)
    .save({ workspaceId, deploymentId, state: 'PENDING', payload: {}, maxRetries: 3, timeoutSeconds: 60, ...over });
  if (ageSeconds) await db.query(`UPDATE tasks SET created_at = now() - $2 * interval '1 second' WHERE id = $1`, [saved.id, ageSeconds]);
  return db.getRepository(Task).findOneByOrFail({ id: saved.id });
}

const row = (id: string) => db.getRepository(Task).findOneByOrFail({ id });

async function ownDeployment(): Promise<string> {
  return (
    await db
      .getRepository(Deployment)
      .save({ workspaceId, name: `q-${randomUUID()}`, kind: 'task_queue', state: 'ready', latestVersion: 1 })
  ).id;
}

describe('TasksRepository', () => {
  describe('the submission outbox', () => {
    it('saves a pending task, until the deployment has maxPending waiting', async () => {
      const own = await ownDeployment();
      const first = await tasks.createPending(newTask({ deploymentId: own, ttlSeconds: 30, callbackUrl: 'http://cb' }), 2);
      expect(first).toMatchObject({
        deploymentId: own,
        version: 1,
        payload: { n: 1 },
        maxRetries: 3,
        timeoutSeconds: 60,
        ttlSeconds: 30,
        callbackUrl: 'http://cb',
      });
      expect(first!.createdAt).toBeInstanceOf(Date);
      expect(await tasks.createPending(newTask({ deploymentId: own }), 2)).toBeDefined();
      expect(await tasks.createPending(newTask({ deploymentId: own }), 2)).toBeUndefined();
      expect(await db.getRepository(Task).countBy({ deploymentId: own })).toBe(2);
    });

    it('saves submits arriving together in one statement, each deployment taking new tasks in order while they fit under its maxPending', async () => {
      const [a, b] = [await ownDeployment(), await ownDeployment()];
      await tasks.createPending(newTask({ deploymentId: a }), 3);
      const submits = [a, a, b, a, b, a].map((deploymentId) => newTask({ deploymentId, payload: { deploymentId } }));
      const saved = await Promise.all(submits.map((t) => tasks.createPending(t, 3)));
      expect(saved.map((s) => s?.id)).toEqual([submits[0].id, submits[1].id, submits[2].id, undefined, submits[4].id, undefined]);
      expect(saved[4]).toMatchObject({ deploymentId: b, payload: { deploymentId: b } });
      expect(await db.getRepository(Task).countBy({ deploymentId: a })).toBe(3);
      expect(await db.getRepository(Task).countBy({ deploymentId: b })).toBe(2);
    });

    it('saves the good submits of a statement one of them breaks, and refuses only that one', async () => {
      const own = await ownDeployment();
      const good = newTask({ deploymentId: own });
      const gone = newTask({ deploymentId: randomUUID() });
      const [saved, refused] = await Promise.allSettled([tasks.createPending(good, 10), tasks.createPending(gone, 10)]);
      expect(saved).toMatchObject({ status: 'fulfilled', value: { id: good.id } });
      expect(refused.status).toBe('rejected');
    });

    it('records where TASKS stored a task once', async () => {
      const t = await tasks.createPending(newTask(), 1000);
      expect(await tasks.markEnqueued(t!.id, 41)).toBe(true);
      expect(await tasks.markEnqueued(t!.id, 42)).toBe(false);
      expect(await row(t!.id)).toMatchObject({ streamSeq: 41, enqueuedAt: expect.any(Date) });
    });

    it('lists pending tasks never published once they are old enough, oldest first', async () => {
      const own = await ownDeployment();
      const fresh = await task({ deploymentId: own });
      const old = await task({ deploymentId: own }, 60);
      const older = await task({ deploymentId: own }, 120);
      const sent = await task({ deploymentId: own, enqueuedAt: new Date() }, 60);
      const running = await task({ deploymentId: own, state: 'RUNNING' }, 60);
      const unsent = (await tasks.listUnsent(5, 10_000)).map((t) => t.id);
      expect(unsent.indexOf(older.id)).toBeLessThan(unsent.indexOf(old.id));
      expect(unsent).toContain(old.id);
      for (const t of [fresh, sent, running]) expect(unsent).not.toContain(t.id);
    });
  });

  describe('transitions', () => {
    /** The container the scheduler placed on each machine for the deployment's version 1. */
    const placed: Record<string, string> = { 'm-1': 'c-1', 'm-2': 'c-2' };
    beforeAll(async () => {
      const [v] = await db.query(`INSERT INTO deployment_versions (deployment_id, version, spec) VALUES ($1, 1, '{}') RETURNING id`, [
        deploymentId,
      ]);
      const other = await ownDeployment();
      const [w] = await db.query(`INSERT INTO deployment_versions (deployment_id, version, spec) VALUES ($1, 1, '{}') RETURNING id`, [
        other,
      ]);
      await db.query(`INSERT INTO machines (id, pool, state) VALUES ('m-1', 'default', 'ready'), ('m-2', 'default', 'ready')`);
      await db.query(
        `INSERT INTO containers (id, deployment_version_id, machine_id, state, requested)
         VALUES ('c-1', $1, 'm-1', 'ready', '{}'), ('c-2', $1, 'm-2', 'ready', '{}'), ('c-other', $2, 'm-1', 'ready', '{}')`,
        [v.id, w.id],
      );
    });
    const start = (taskId: string, attempt: number, machineId = 'm-1', containerId = placed[machineId]) =>
      tasks.markStarted({ taskId, attempt, startedAt: new Date().toISOString(), containerId, machineId });
    const lease = (taskId: string, attempt: number, machineId = 'm-1') => ({ taskId, attempt, machineId, containerId: placed[machineId] });
    /** A result of attempt `attempt` from the lease holder's container on `machineId`. */
    const completion = (taskId: string, attempt: number, machineId: string, resultJson: string) =>
      tasks.complete({
        taskId,
        resultJson,
        resultRef: null,
        attempt,
        completedAt: new Date().toISOString(),
        containerId: placed[machineId],
        machineId,
      });

    it('starts an attempt once, never an older one, and answers the row as it was', async () => {
      const t = await task();
      const ofTask = { workspaceId, deploymentId };
      expect(await start(t.id, 1)).toEqual({
        ...ofTask,
        was: 'PENDING',
        wasAttempt: 0,
        wasMachine: null,
        wasContainer: null,
        wasStartedAt: null,
      });
      expect(await start(t.id, 1)).toBeUndefined();
      expect(await start(t.id, 2, 'm-2')).toEqual({
        ...ofTask,
        was: 'RUNNING',
        wasAttempt: 1,
        wasMachine: 'm-1',
        wasContainer: 'c-1',
        wasStartedAt: expect.any(Date),
      });
      expect(await start(t.id, 1)).toBeUndefined();
      expect(await row(t.id)).toMatchObject({ state: 'RUNNING', attempts: 2, machineId: 'm-2', containerId: 'c-2' });
    });

    it('records no start from a container the scheduler did not place on that machine for the task', async () => {
      const t = await task();
      expect(await start(t.id, 1, 'm-2', 'c-1')).toBeUndefined(); // c-1 is m-1's
      expect(await start(t.id, 1, 'm-1', 'c-other')).toBeUndefined(); // another deployment's
      expect(await start(t.id, 1, 'm-1', 'c-nowhere')).toBeUndefined();
      expect(await row(t.id)).toMatchObject({ state: 'PENDING', attempts: 0, machineId: null });
    });

    it('retries only on the word of the lease holder of the current attempt', async () => {
      const t = await task();
      await start(t.id, 2);
      expect(await tasks.markRetrying(lease(t.id, 1), 'old')).toBeUndefined();
      expect(await tasks.markRetrying(lease(t.id, 2, 'm-2'), 'not mine')).toBeUndefined();
      expect(await tasks.markRetrying(lease(t.id, 2), 'boom')).toBeDefined();
      expect(await row(t.id)).toMatchObject({ state: 'RETRY', attempts: 2, error: 'boom' });
    });

    it('fails for good once, from the lease holder, making a callback due when there is a URL', async () => {
      const t = await task({ callbackUrl: 'http://cb' });
      const failure = (claim: ReturnType<typeof lease>, over: { state?: 'ERROR' | 'TIMEOUT'; error?: string } = {}) => ({
        ...claim,
        state: 'TIMEOUT' as const,
        error: 'timeout: slow',
        failedAt: new Date().toISOString(),
        ...over,
      });
      await start(t.id, 1);
      expect(await tasks.markFailed(failure(lease(t.id, 1, 'm-2')))).toBeUndefined();
      expect(await tasks.markFailed(failure(lease(t.id, 1)))).toBeDefined();
      expect(await tasks.markFailed(failure(lease(t.id, 1), { state: 'ERROR', error: 'again' }))).toBeUndefined();
      expect(await tasks.markRetrying(lease(t.id, 1), 'later')).toBeUndefined();
      expect(await row(t.id)).toMatchObject({
        state: 'TIMEOUT',
        error: 'timeout: slow',
        machineId: 'm-1',
        callbackState: 'pending',
        callbackNextAt: expect.any(Date),
      });
      const quiet = await task();
      await start(quiet.id, 1);
      await tasks.markFailed(failure(lease(quiet.id, 1), { state: 'ERROR' }));
      expect(await row(quiet.id)).toMatchObject({ state: 'ERROR', callbackState: null, callbackNextAt: null });
    });

    it('ends a task whose last attempt was lost on the word of a machine placed to be handed it', async () => {
      const t = await task();
      const lost = (machineId: string, containerId: string, attempt = 1) =>
        tasks.markLastAttemptLost({
          taskId: t.id,
          attempt,
          machineId,
          containerId,
          error: 'container-lost',
          failedAt: new Date().toISOString(),
        });
      expect(await lost('m-2', 'c-other')).toBeUndefined();
      await start(t.id, 2);
      expect(await lost('m-2', 'c-2', 1)).toBeUndefined(); // attempt 2 began since
      expect(await lost('m-2', 'c-2', 2)).toBeDefined();
      expect(await row(t.id)).toMatchObject({ state: 'ERROR', attempts: 2, machineId: 'm-1', error: 'container-lost' });
    });

    it('answers each of the starts and results handed in together (one statement, a task named twice in the next) as if alone', async () => {
      const [a, b, c] = [await task(), await task(), await task()];
      const starts = await Promise.all([start(a.id, 1), start(b.id, 1, 'm-2', 'c-1'), start(c.id, 1), start(c.id, 2, 'm-2')]);
      expect(starts.map((s) => s?.wasAttempt)).toEqual([0, undefined, 0, 1]);
      expect(await tasks.leaseOf(c.id)).toEqual({ state: 'RUNNING', attempts: 2, machineId: 'm-2', containerId: 'c-2' });
      const results = await Promise.all([
        completion(a.id, 1, 'm-1', '{"a": 1}'),
        completion(b.id, 1, 'm-2', '{"b": 1}'),
        completion(c.id, 1, 'm-1', '{"old": 1}'),
        completion(c.id, 2, 'm-2', '{"c": "it\'s \\\\ {2}"}'),
      ]);
      expect(results.map((r) => r && { id: r.id, result: r.result })).toEqual([
        { id: a.id, result: { a: 1 } },
        undefined,
        undefined,
        { id: c.id, result: { c: "it's \\ {2}" } },
      ]);
      expect(await row(b.id)).toMatchObject({ state: 'PENDING', result: null });
    });

    it('completes once, from the holder of the lease of the current attempt only', async () => {
      const t = await task();
      const completeOwn = (resultJson: string, machineId: string, attempt = 1) => completion(t.id, attempt, machineId, resultJson);
      expect(await completeOwn('{"never": "given"}', 'm-1')).toBeUndefined();
      await start(t.id, 1);
      expect(await completeOwn('{"not": "holder"}', 'm-2')).toBeUndefined();
      // The task as it now is, as its waiters answer it: no read after this write.
      expect(await completeOwn('{"first": true}', 'm-1')).toEqual({
        ...(await tasks.findInWorkspace(t.id, workspaceId, true)),
        workspaceId,
        deploymentId: t.deploymentId,
        deploymentName: 'queue',
        state: 'COMPLETE',
        result: { first: true },
        machineId: 'm-1',
        containerId: 'c-1',
        startedAt: expect.any(Date),
      });
      expect(await completeOwn('{"second": true}', 'm-1')).toBeUndefined();
      expect(await start(t.id, 2)).toBeUndefined();
      expect(await tasks.leaseOf(t.id)).toEqual({ state: 'COMPLETE', attempts: 1, machineId: 'm-1', containerId: 'c-1' });
      expect(await row(t.id)).toMatchObject({
        state: 'COMPLETE',
        result: { first: true },
        machineId: 'm-1',
        startedAt: expect.any(Date),
        error: null,
      });
    });

    it('records an attempt that ended before its start was reported as started and completed in one, on the conditions of a start', async () => {
      const startedAt = new Date(Date.now() - 20).toISOString();
      const both = (taskId: string, attempt: number, machineId: string, containerId = placed[machineId], resultJson = '{"quick": true}') =>
        tasks.startAndComplete({
          taskId,
          resultJson,
          resultRef: null,
          attempt,
          completedAt: new Date().toISOString(),
          startedAt,
          containerId,
          machineId,
        });
      const t = await task({ callbackUrl: 'http://cb' });
      expect(await both(t.id, 1, 'm-2', 'c-1')).toBeUndefined(); // c-1 is m-1's: no placement, no lease
      expect(await row(t.id)).toMatchObject({ state: 'PENDING', attempts: 0, machineId: null });
      const done = await both(t.id, 1, 'm-1');
      expect(done).toEqual({
        task: { ...(await tasks.findInWorkspace(t.id, workspaceId, true)), result: { quick: true } },
        before: { was: 'PENDING', wasAttempt: 0, wasMachine: null, wasContainer: null, wasStartedAt: null, workspaceId, deploymentId },
      });
      expect(await row(t.id)).toMatchObject({
        state: 'COMPLETE',
        attempts: 1,
        machineId: 'm-1',
        containerId: 'c-1',
        startedAt: new Date(startedAt),
        result: { quick: true },
        callbackState: 'pending',
      });
      // One completion per task: the same again, a later attempt, a plain result, a start: none changes it.
      expect(await both(t.id, 1, 'm-1')).toBeUndefined();
      expect(await both(t.id, 2, 'm-2', 'c-2', '{"second": true}')).toBeUndefined();
      expect(await completion(t.id, 1, 'm-1', '{"again": true}')).toBeUndefined();
      expect(await start(t.id, 2, 'm-2')).toBeUndefined();
      expect(await tasks.settledBy(lease(t.id, 1), ['COMPLETE'])).toMatchObject({ machineId: 'm-1', startedAt: new Date(startedAt) });
      // Over an attempt that started and went silent: the row as it was says which one was lost.
      const lost = await task();
      await start(lost.id, 1, 'm-2');
      expect((await both(lost.id, 1, 'm-1'))?.task).toBeUndefined(); // not the attempt after the recorded one
      expect(await both(lost.id, 2, 'm-1')).toMatchObject({
        task: { state: 'COMPLETE', attempts: 2, machineId: 'm-1' },
        before: { was: 'RUNNING', wasAttempt: 1, wasMachine: 'm-2', wasContainer: 'c-2' },
      });
    });

    it('cancels a task of its workspace not yet final, once', async () => {
      const t = await task();
      await tasks.markEnqueued(t.id, 7);
      expect(await tasks.cancel(t.id, randomUUID())).toBeUndefined();
      expect(await tasks.cancel(t.id, workspaceId)).toEqual({
        id: t.id,
        workspaceId,
        was: 'PENDING',
        machineId: null,
        attempts: 0,
        streamSeq: 7,
        deploymentId,
        version: 1,
        endedAt: expect.any(Date),
      });
      expect(await tasks.cancel(t.id, workspaceId)).toBeUndefined();
      expect(await row(t.id)).toMatchObject({ state: 'CANCELLED', error: 'cancelled by the user' });
    });

    it('cancels every unfinished task of a deployment', async () => {
      const own = await ownDeployment();
      const pending = await task({ deploymentId: own });
      const running = await task({ deploymentId: own, state: 'RUNNING' });
      const done = await task({ deploymentId: own, state: 'COMPLETE' });
      const cancelled = await tasks.cancelAllOf(own, 'queue deleted');
      expect(cancelled.map((c) => c.id).sort()).toEqual([pending.id, running.id].sort());
      expect(cancelled[0]).toEqual({ id: expect.any(String), workspaceId, streamSeq: null, endedAt: expect.any(Date) });
      expect(await row(done.id)).toMatchObject({ state: 'COMPLETE' });
      expect(await tasks.cancelAllOf(own, 'again')).toEqual([]);
    });

    it("locks a deployment's tasks in id order, so a batch locking them in id order meanwhile waits for it instead of deadlocking", async () => {
      const own = await ownDeployment();
      // Stored high id first: a statement locking rows as it scans them would take that one first.
      const high = await task({ id: 'ffffffff-ffff-4fff-bfff-ffffffffffff', deploymentId: own });
      const low = await task({ id: '00000000-0000-4000-8000-000000000000', deploymentId: own });
      const cancelled = await againstIdOrderedLocks(db, low.id, high.id, () => tasks.cancelAllOf(own, 'queue deleted'));
      expect(cancelled.map((c) => c.id).sort()).toEqual([low.id, high.id]);
    });
  });

  describe('ttl expiry', () => {
    it('expires pending tasks past their ttl once, and no others', async () => {
      const past = await task({ ttlSeconds: 10, streamSeq: 9 }, 60);
      const within = await task({ ttlSeconds: 600 }, 60);
      const forever = await task({ ttlSeconds: null }, 600);
      const started = await task({ ttlSeconds: 10, state: 'RUNNING' }, 60);
      const expired = await tasks.expirePastTtl();
      expect(expired).toContainEqual({ id: past.id, workspaceId, streamSeq: 9, endedAt: expect.any(Date) });
      for (const t of [within, forever, started]) expect(expired.map((e) => e.id)).not.toContain(t.id);
      expect((await tasks.expirePastTtl()).map((e) => e.id)).not.toContain(past.id);
      expect(await row(past.id)).toMatchObject({ state: 'EXPIRED', error: 'waited longer than its ttl of 10 s without starting' });
    });

    it('skips a task another transaction holds', async () => {
      const held = await task({ ttlSeconds: 1 }, 60);
      const other = db.createQueryRunner();
      await other.startTransaction();
      try {
        await other.query(`SELECT id FROM tasks WHERE id = $1 FOR UPDATE`, [held.id]);
        expect((await tasks.expirePastTtl()).map((e) => e.id)).not.toContain(held.id);
      } finally {
        await other.rollbackTransaction();
        await other.release();
      }
      expect((await tasks.expirePastTtl()).map((e) => e.id)).toContain(held.id);
    });
  });

  describe('reads', () => {
    it('finds a task of the workspace with its deployment name, its result only when asked for', async () => {
      const t = await task({ state: 'COMPLETE', result: { ok: 1 }, streamSeq: 12 });
      const found = await tasks.findInWorkspace(t.id, workspaceId, true);
      expect(found).toMatchObject({
        id: t.id,
        deploymentName: 'queue',
        version: 1,
        state: 'COMPLETE',
        result: { ok: 1 },
        streamSeq: 12,
        maxRetries: 3,
        createdAt: expect.any(Date),
      });
      expect((await tasks.findInWorkspace(t.id, workspaceId, false))?.result).toBeUndefined();
      expect(await tasks.findInWorkspace(t.id, randomUUID(), true)).toBeUndefined();
    });

    it('answers each of the reads asked for together, in the workspace asked for only', async () => {
      const [a, b] = [await task({ state: 'COMPLETE', result: { a: 1 } }), await task()];
      const found = await Promise.all([
        tasks.findInWorkspace(a.id, workspaceId, true),
        tasks.findInWorkspace(b.id, randomUUID(), true),
        tasks.findInWorkspace(b.id, workspaceId, true),
        tasks.findInWorkspace(a.id, workspaceId, true),
      ]);
      expect(found.map((f) => f && { id: f.id, result: f.result })).toEqual([
        { id: a.id, result: { a: 1 } },
        undefined,
        { id: b.id, result: null },
        { id: a.id, result: { a: 1 } },
      ]);
    });

    it('lists newest first, filtered by deployment name and state, paged by keyset', async () => {
      const ws = (await db.getRepository(Workspace).save({ name: `list-${randomUUID()}` })).id;
      const a = (await db.getRepository(Deployment).save({ workspaceId: ws, name: 'a', kind: 'task_queue' })).id;
      const b = (await db.getRepository(Deployment).save({ workspaceId: ws, name: 'b', kind: 'task_queue', state: 'deleted' })).id;
      const t1 = await task({ workspaceId: ws, deploymentId: a }, 30);
      const t2 = await task({ workspaceId: ws, deploymentId: a, state: 'COMPLETE' }, 20);
      const t3 = await task({ workspaceId: ws, deploymentId: b }, 10);
      const ids = (list: TaskWithDeployment[]) => list.map((t) => t.id);
      expect(ids(await tasks.listForWorkspace(ws, {}, 10))).toEqual([t3.id, t2.id, t1.id]);
      expect(ids(await tasks.listForWorkspace(ws, { deploymentName: 'a' }, 10))).toEqual([t2.id, t1.id]);
      expect(ids(await tasks.listForWorkspace(ws, { deploymentName: 'b' }, 10))).toEqual([]);
      expect(ids(await tasks.listForWorkspace(ws, { states: ['PENDING'] }, 10))).toEqual([t3.id, t1.id]);
      const [first] = await tasks.listForWorkspace(ws, {}, 1);
      expect(first.deploymentName).toBe('b');
      expect(ids(await tasks.listForWorkspace(ws, { before: { createdAt: first.createdAt.toISOString(), id: first.id } }, 10))).toEqual([
        t2.id,
        t1.id,
      ]);
    });
  });

  describe('callbacks', () => {
    async function dueCallback(): Promise<Task> {
      const t = await task({ state: 'COMPLETE', callbackUrl: 'http://cb', result: { v: 1 } });
      await db.query(`UPDATE tasks SET callback_state = 'pending', callback_next_at = now() - interval '1 second' WHERE id = $1`, [t.id]);
      return t;
    }
    /** Claims every due callback and delivers none: leaves the rows as they were. */
    const claimedIds = async (limit = 1000) => {
      let ids: string[] = [];
      await tasks.claimCallbacksDue(limit, async (claim) => {
        ids = claim.tasks.map((t) => t.id);
      });
      return ids;
    };

    it('claims due callbacks with the task and its result, and records a delivery', async () => {
      const t = await dueCallback();
      const notYet = await task({ callbackUrl: 'http://cb' });
      await db.query(`UPDATE tasks SET callback_state = 'pending', callback_next_at = now() + interval '1 hour' WHERE id = $1`, [
        notYet.id,
      ]);
      await tasks.claimCallbacksDue(1000, async (claim) => {
        expect(claim.tasks.map((c) => c.id)).toContain(t.id);
        expect(claim.tasks.map((c) => c.id)).not.toContain(notYet.id);
        expect(claim.tasks.find((c) => c.id === t.id)).toMatchObject({
          deploymentName: 'queue',
          result: { v: 1 },
          callbackUrl: 'http://cb',
          callbackAttempts: 0,
        });
        await claim.markDelivered(t.id, 1);
      });
      expect(await row(t.id)).toMatchObject({ callbackState: 'delivered', callbackAttempts: 1, callbackNextAt: null });
      expect(await claimedIds()).not.toContain(t.id);
    });

    it('records a failed attempt: retried after the delay, or given up', async () => {
      const retried = await dueCallback();
      const given = await dueCallback();
      await tasks.claimCallbacksDue(1000, async (claim) => {
        await claim.markAttemptFailed(retried.id, 3, 60_000, 'answered 503');
        await claim.markAttemptFailed(given.id, 8, null, 'answered 500');
      });
      const r = await row(retried.id);
      expect(r).toMatchObject({ callbackState: 'pending', callbackAttempts: 3, callbackError: 'answered 503' });
      expect(r.callbackNextAt!.getTime() - Date.now()).toBeGreaterThan(50_000);
      expect(await row(given.id)).toMatchObject({
        callbackState: 'failed',
        callbackAttempts: 8,
        callbackNextAt: null,
        callbackError: 'answered 500',
      });
      const due = await claimedIds();
      expect(due).not.toContain(retried.id);
      expect(due).not.toContain(given.id);
    });

    it('clears the last error once a callback is delivered', async () => {
      const t = await dueCallback();
      await tasks.claimCallbacksDue(1000, async (claim) => claim.markAttemptFailed(t.id, 1, 0, 'answered 502'));
      expect(await row(t.id)).toMatchObject({ callbackError: 'answered 502', callbackState: 'pending' });
      await tasks.claimCallbacksDue(1000, async (claim) => claim.markDelivered(t.id, 2));
      expect(await row(t.id)).toMatchObject({ callbackError: null, callbackState: 'delivered', callbackAttempts: 2 });
    });

    it('never hands one callback to two concurrent claims', async () => {
      const mine = [await dueCallback(), await dueCallback(), await dueCallback()].map((t) => t.id);
      const before = await claimedIds();
      let first: string[] = [];
      let second: string[] = [];
      await tasks.claimCallbacksDue(before.length - 1, async (claim) => {
        first = claim.tasks.map((t) => t.id);
        second = await claimedIds();
      });
      expect(first.length).toBe(before.length - 1);
      expect(first.filter((id) => second.includes(id))).toEqual([]);
      expect([...first, ...second].sort()).toEqual([...before].sort());
      for (const id of mine) expect(before).toContain(id);
    });
  });

  describe('spot checks', () => {
    const check = {
      state: 'pending' as const,
      machineId: 'm-checked',
      attempt: 1,
      resultSha256: `sha256:${'1'.repeat(64)}`,
      verifierMachineId: 'm-verifier',
      verifierContainerId: 'c-verifier',
      requestedAt: new Date().toISOString(),
    };
    const verifier = { machineId: 'm-verifier', containerId: 'c-verifier' };

    it('records a check once, on a completed task only, answering its input', async () => {
      const done = await task({ state: 'COMPLETE', payload: { n: 7 } });
      const running = await task({ state: 'RUNNING' });
      expect(await tasks.beginSpotCheck(done.id, check)).toEqual({ payload: { n: 7 } });
      expect(await tasks.beginSpotCheck(done.id, { ...check, verifierMachineId: 'm-other' })).toBeUndefined();
      expect(await tasks.beginSpotCheck(running.id, check)).toBeUndefined();
      expect((await row(done.id)).spotCheck).toEqual(check);
      expect((await tasks.findInWorkspace(done.id, workspaceId, false))?.spotCheck).toEqual(check);
    });

    it('settles a pending check once, from the verifier it names only', async () => {
      const done = await task({ state: 'COMPLETE' });
      await tasks.beginSpotCheck(done.id, check);
      const change = { state: 'disagreed' as const, verifierSha256: `sha256:${'2'.repeat(64)}`, checkedAt: new Date().toISOString() };
      expect(await tasks.settleSpotCheck(done.id, { ...verifier, machineId: 'm-checked' }, change)).toBeUndefined();
      expect(await tasks.settleSpotCheck(done.id, { ...verifier, containerId: 'c-other' }, change)).toBeUndefined();
      expect(await tasks.settleSpotCheck(done.id, verifier, change)).toEqual({
        workspaceId,
        deploymentId,
        spotCheck: { ...check, ...change },
      });
      expect(await tasks.settleSpotCheck(done.id, verifier, { ...change, state: 'agreed' })).toBeUndefined();
      expect(await tasks.spotCheckOf(done.id)).toMatchObject({ spotCheck: { state: 'disagreed' } });
      expect((await row(done.id)).state).toBe('COMPLETE');
    });

    it('lists the pending checks, oldest completion first, and never a settled one', async () => {
      const older = await task({ state: 'COMPLETE', timeoutSeconds: 30, endedAt: new Date(Date.now() - 60_000) });
      const newer = await task({ state: 'COMPLETE', timeoutSeconds: 90, endedAt: new Date() });
      const settled = await task({ state: 'COMPLETE', endedAt: new Date(Date.now() - 120_000) });
      for (const t of [newer, older, settled]) await tasks.beginSpotCheck(t.id, check);
      await tasks.settleSpotCheck(settled.id, verifier, { state: 'expired', reason: 'no answer', checkedAt: new Date().toISOString() });
      const pending = await tasks.pendingSpotChecks(1000);
      const ours = pending.filter((p) => [older.id, newer.id, settled.id].includes(p.taskId));
      expect(ours).toEqual([
        { taskId: older.id, timeoutSeconds: 30, spotCheck: check },
        { taskId: newer.id, timeoutSeconds: 90, spotCheck: check },
      ]);
      expect(await tasks.spotCheckOf(settled.id)).toMatchObject({ spotCheck: { state: 'expired', reason: 'no answer' } });
    });
  });
});
