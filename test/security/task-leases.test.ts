import { TASK_ATTEMPT_ENDED, TASK_COMPLETED, TASK_STARTED, taskResultName } from '#tern/contracts';
import type { Messaging } from '#tern/messaging';
import { counterValue } from '../support/metrics.js';
import { waitFor } from '../support/processes.js';
import { TaskLedger } from '../support/task-ledger.js';

/**
 * A machine's word about tasks it does not hold, sent on its own subjects (what its NATS
 * permissions allow), refused by the gateway: each refusal is asserted through the gateway's
 * own counters, not only by the task staying as it was.
 */
describe('task events from machines that do not hold the task', () => {
  let ledger: TaskLedger;
  let messaging: Messaging;
  let workspaceId: string;
  let deploymentId: string;

  beforeAll(async () => {
    // c-1 runs the queue on m-1; m-2 (the attacker) has joined but holds nothing of it.
    ledger = await TaskLedger.start('leases', { 'm-1': 'c-1' });
    await ledger.addMachine('m-2');
    ({ messaging, workspaceId, deploymentId } = ledger);
  });

  afterAll(async () => {
    await ledger?.stop();
  });

  const task = () => ledger.task();
  const row = (id: string) => ledger.row(id);
  const event = (taskId: string, machineId: string, containerId: string) => ({
    taskId,
    deploymentId,
    deploymentVersion: 1,
    workspaceId,
    machineId,
    containerId,
    attempt: 1,
  });
  const started = (taskId: string, machineId: string, containerId: string) =>
    messaging.publish(TASK_STARTED, { ...event(taskId, machineId, containerId), startedAt: new Date().toISOString() });
  const completed = (taskId: string, machineId: string, containerId: string, tokens?: string[]) =>
    messaging.publish(
      TASK_COMPLETED,
      { ...event(taskId, machineId, containerId), durationMs: 5, result: { forged: machineId }, completedAt: new Date().toISOString() },
      tokens ? { tokens } : {},
    );

  const counter = (name: string, labels: Record<string, string>) => counterValue(`http://127.0.0.1:${ledger.port}`, name, labels);
  const refused = (reason: string) => counter('tern_task_events_refused_total', { reason });

  it('drops and counts a task.completed from a machine that does not hold the lease', async () => {
    const id = await task();
    await started(id, 'm-1', 'c-1');
    await waitFor('the lease of m-1', async () => (await row(id)).state === 'RUNNING');
    const before = await refused('not-lease-holder');
    await completed(id, 'm-2', 'c-1');
    await waitFor('the refusal counted', async () => (await refused('not-lease-holder')) === before + 1, 10_000, 100);
    expect(await row(id)).toMatchObject({ state: 'RUNNING', result: null, machine_id: 'm-1' });
    await completed(id, 'm-1', 'c-1');
    await waitFor('the holder completes it', async () => (await row(id)).state === 'COMPLETE');
    expect((await row(id)).result).toEqual({ forged: 'm-1' });
  });

  it("tells metering again when the holder's outcome comes again after the task ended (a crash between recording and telling)", async () => {
    const id = await task();
    const facts: string[] = [];
    const sub = ledger.nc.subscribe(messaging.subject(TASK_ATTEMPT_ENDED), {
      callback: (_err, msg) => {
        const fact = msg.json<{ taskId: string; machineId: string }>();
        if (fact.taskId === id) facts.push(fact.machineId);
      },
    });
    try {
      await started(id, 'm-1', 'c-1');
      await waitFor('the lease of m-1', async () => (await row(id)).state === 'RUNNING');
      await completed(id, 'm-1', 'c-1');
      await waitFor('the attempt told once', async () => facts.length === 1);
      await completed(id, 'm-1', 'c-1');
      await waitFor('the repeat told again', async () => facts.length === 2);
      expect(facts).toEqual(['m-1', 'm-1']);
      expect((await row(id)).result).toEqual({ forged: 'm-1' });
    } finally {
      sub.unsubscribe();
    }
  });

  it('refuses a task.started from a container not placed on that machine for the task', async () => {
    const id = await task();
    const before = await refused('no-placement');
    await started(id, 'm-2', 'c-1');
    await waitFor('the refusal counted', async () => (await refused('no-placement')) === before + 1, 10_000, 100);
    expect(await row(id)).toMatchObject({ state: 'PENDING', attempts: 0, machine_id: null });
  });

  it('never completes a PENDING task no machine was given, even from a machine placed for its queue', async () => {
    const id = await task();
    const before = await refused('not-yet-leased');
    await completed(id, 'm-1', 'c-1');
    // Waited for (its start may be behind it), then dropped.
    await waitFor('the refusal counted', async () => (await refused('not-yet-leased')) === before + 1, 30_000, 250);
    expect(await row(id)).toMatchObject({ state: 'PENDING', result: null, machine_id: null });
  });

  it("refuses a completion whose resultRef points at another task's result object", async () => {
    const [victim, own] = [await task(), await task()];
    await started(own, 'm-1', 'c-1');
    await waitFor('the lease of m-1', async () => (await row(own)).state === 'RUNNING');
    const before = await refused('foreign-result');
    // The lease holder of its own task names the (large) result of another tenant's task, to read it through its own.
    await messaging.publish(TASK_COMPLETED, {
      ...event(own, 'm-1', 'c-1'),
      durationMs: 5,
      resultRef: taskResultName(victim, 1),
      completedAt: new Date().toISOString(),
    });
    await waitFor('the refusal counted', async () => (await refused('foreign-result')) === before + 1, 10_000, 100);
    expect(await row(own)).toMatchObject({ state: 'RUNNING', result: null });
  });

  it("terminates and counts a task event whose payload names another machine than its subject's", async () => {
    const id = await task();
    await started(id, 'm-1', 'c-1');
    await waitFor('the lease of m-1', async () => (await row(id)).state === 'RUNNING');
    const labels = { subject: TASK_COMPLETED.subject };
    const before = await counter('tern_messages_machine_mismatch_total', labels);
    // m-2 publishes on its own subject a completion that claims to be from m-1, the holder.
    await completed(id, 'm-1', 'c-1', ['m-2']);
    await waitFor(
      'the refusal counted',
      async () => (await counter('tern_messages_machine_mismatch_total', labels)) === before + 1,
      10_000,
      100,
    );
    expect(await row(id)).toMatchObject({ state: 'RUNNING', result: null });
  });
});
