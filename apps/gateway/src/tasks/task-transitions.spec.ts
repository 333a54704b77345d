import { TASK_ATTEMPT_ENDED, TASK_FAILED, type TaskCompleted, type TaskFailed, type TaskStarted } from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import { type SettledAttempt, type StartedOver, TasksRepository } from '#tern/persistence';
import { newTestService } from '../../../../test/support/test-service.js';
import { AttemptFacts } from './attempt-facts.js';
import { TASK_START_REPORT_DELAY_MS } from '#tern/tasks';
import { TaskTransitions } from './task-transitions.js';
import { TaskWaiters } from './task-waiters.js';

const observedAt = new Date('2026-01-01T00:01:00.000Z');

const started = (over: Partial<TaskStarted> = {}): TaskStarted => ({
  taskId: 't1',
  deploymentId: 'd1',
  workspaceId: 'w1',
  deploymentVersion: 1,
  containerId: 'c2',
  machineId: 'm2',
  attempt: 2,
  startedAt: '2026-01-01T00:00:59.000Z',
  ...over,
});

/** Attempt 1 of task t1, leased to container c1 on machine m1. */
const firstAttempt = { taskId: 't1', deploymentId: 'd1', workspaceId: 'w1', containerId: 'c1', machineId: 'm1', attempt: 1 };

const failed = (over: Partial<TaskFailed> = {}): TaskFailed => ({
  ...firstAttempt,
  cause: 'error',
  error: 'boom',
  willRetry: true,
  durationMs: 5_000,
  failedAt: '2026-01-01T00:00:30.000Z',
  ...over,
});

const completed = (over: Partial<TaskCompleted> = {}): TaskCompleted => ({
  ...firstAttempt,
  durationMs: 20_000,
  result: { answer: 42 },
  completedAt: '2026-01-01T00:00:50.000Z',
  ...over,
});

/** The attempt as the tasks table holds it: started at 00:00:00 on m1 (the lease). */
const settled: SettledAttempt = {
  workspaceId: 'w1',
  deploymentId: 'd1',
  machineId: 'm1',
  containerId: 'c1',
  startedAt: new Date('2026-01-01T00:00:00.000Z'),
};

async function transitions() {
  const { sut, fake } = await newTestService(TaskTransitions);
  const tasks = fake(TasksRepository);
  const messaging = fake(Messaging);
  messaging.publish.mockResolvedValue({ seq: 1 } as never);
  // The facts go out through the real AttemptFacts, on the fake NATS.
  const facts = new AttemptFacts(messaging);
  fake(AttemptFacts).tell.mockImplementation((f) => facts.tell(f));
  return { sut, tasks, messaging, waiters: fake(TaskWaiters) };
}

/** The payloads published on one contract. */
function published(messaging: Awaited<ReturnType<typeof transitions>>['messaging'], subject: string): unknown[] {
  return messaging.publish.mock.calls.filter(([c]) => c.subject === subject).map(([, payload]) => payload);
}

describe('TaskTransitions.started', () => {
  it("records the start at the time it reached NATS, not the agent's word", async () => {
    const { sut, tasks } = await transitions();
    tasks.markStarted.mockResolvedValue({ was: 'PENDING', wasAttempt: 0, wasMachine: null } as StartedOver);
    expect(await sut.started(started(), observedAt)).toEqual({ accepted: true });
    expect(tasks.markStarted).toHaveBeenCalledWith(expect.objectContaining({ taskId: 't1', startedAt: observedAt.toISOString() }));
  });

  it('reports the attempt before as lost on its own machine when it never ended, with no duration', async () => {
    const { sut, tasks, messaging } = await transitions();
    tasks.markStarted.mockResolvedValue({
      was: 'RUNNING',
      wasAttempt: 1,
      wasMachine: 'm1',
      wasContainer: 'c1',
      wasStartedAt: settled.startedAt,
      workspaceId: 'w1',
      deploymentId: 'd1',
    });
    await sut.started(started(), observedAt);
    expect(published(messaging, TASK_FAILED.subject)).toEqual([
      expect.objectContaining({ taskId: 't1', machineId: 'm1', containerId: 'c1', attempt: 1, cause: 'container-lost', willRetry: true }),
    ]);
    const [ended] = published(messaging, TASK_ATTEMPT_ENDED.subject) as Record<string, unknown>[];
    expect(ended).toMatchObject({ taskId: 't1', attempt: 1, machineId: 'm1', outcome: 'failed', cause: 'container-lost' });
    expect(ended).not.toHaveProperty('durationMs');
    expect(ended).not.toHaveProperty('startedAt');
  });

  it('refuses a start from a container not placed for the task (a later attempt than the lease, no row changed)', async () => {
    const { sut, tasks, messaging } = await transitions();
    tasks.markStarted.mockResolvedValue(undefined);
    tasks.leaseOf.mockResolvedValue({ state: 'RUNNING', attempts: 1, machineId: 'm1', containerId: 'c1' } as never);
    const verdict = await sut.started(started({ machineId: 'intruder' }), observedAt);
    expect(verdict).toMatchObject({ accepted: false, why: 'no-placement' });
    expect(verdict.accepted || verdict.detail).toMatch(/from machine intruder: container c2 was not placed on machine intruder/);
    expect(messaging.publish).not.toHaveBeenCalled();
  });

  it('refuses a start of a task that is final already', async () => {
    const { sut, tasks } = await transitions();
    tasks.markStarted.mockResolvedValue(undefined);
    tasks.leaseOf.mockResolvedValue({ state: 'COMPLETE', attempts: 1, machineId: 'm1', containerId: 'c1' } as never);
    expect(await sut.started(started(), observedAt)).toMatchObject({ accepted: false, why: 'final' });
  });
});

describe('TaskTransitions.failed', () => {
  it('moves a failure that will be retried to RETRY and tells metering the attempt, bounded by what was observed', async () => {
    const { sut, tasks, messaging, waiters } = await transitions();
    tasks.markRetrying.mockResolvedValue(settled);
    expect(await sut.failed(failed(), observedAt)).toEqual({ accepted: true });
    expect(tasks.markRetrying).toHaveBeenCalledWith(expect.objectContaining({ taskId: 't1', attempt: 1 }), 'boom');
    expect(tasks.markFailed).not.toHaveBeenCalled();
    // The claim (ended 00:00:30, 5 s) is believed only within the observed lease (from 00:00:00).
    expect(published(messaging, TASK_ATTEMPT_ENDED.subject)).toEqual([
      expect.objectContaining({ outcome: 'failed', cause: 'error', endedAt: '2026-01-01T00:00:30.000Z', durationMs: 5_000 }),
    ]);
    expect(waiters.announce).not.toHaveBeenCalled();
  });

  it('ends a last failed attempt as ERROR, or TIMEOUT for a timeout, and announces the end', async () => {
    const { sut, tasks, waiters } = await transitions();
    tasks.markFailed.mockResolvedValue(settled);
    await sut.failed(failed({ willRetry: false, cause: 'timeout', error: 'no progress' }), observedAt);
    expect(tasks.markFailed).toHaveBeenCalledWith(expect.objectContaining({ state: 'TIMEOUT', error: 'timeout: no progress' }));
    expect(waiters.announce).toHaveBeenCalledWith(expect.objectContaining({ taskId: 't1', state: 'TIMEOUT' }));

    tasks.markFailed.mockClear();
    await sut.failed(failed({ willRetry: false }), observedAt);
    expect(tasks.markFailed).toHaveBeenCalledWith(expect.objectContaining({ state: 'ERROR', error: 'boom' }));
  });

  it("refuses a failure from a machine that does not hold the attempt's lease, and tells no one", async () => {
    const { sut, tasks, messaging, waiters } = await transitions();
    tasks.markFailed.mockResolvedValue(undefined);
    tasks.settledBy.mockResolvedValue(undefined);
    tasks.leaseOf.mockResolvedValue({ state: 'RUNNING', attempts: 1, machineId: 'm1', containerId: 'c1' } as never);
    const verdict = await sut.failed(failed({ willRetry: false, machineId: 'm9', containerId: 'c9' }), observedAt);
    expect(verdict).toMatchObject({ accepted: false, why: 'not-lease-holder' });
    expect(messaging.publish).not.toHaveBeenCalled();
    expect(waiters.announce).not.toHaveBeenCalled();
  });

  it('tells metering again (same message id) when the lease holder repeats a failure already recorded', async () => {
    const { sut, tasks, messaging, waiters } = await transitions();
    tasks.markFailed.mockResolvedValue(undefined);
    tasks.settledBy.mockResolvedValue(settled);
    expect(await sut.failed(failed({ willRetry: false }), observedAt)).toEqual({ accepted: true });
    expect(tasks.settledBy).toHaveBeenCalledWith(expect.objectContaining({ taskId: 't1' }), ['ERROR']);
    expect(messaging.publish).toHaveBeenCalledWith(TASK_ATTEMPT_ENDED, expect.anything(), { msgId: 't1:ended:1' });
    // Announced the first time, not again.
    expect(waiters.announce).not.toHaveBeenCalled();
  });

  it('ends a task whose last attempt was lost, as told by a machine placed to be handed it, against the machine that lost it', async () => {
    const { sut, tasks, messaging, waiters } = await transitions();
    tasks.markFailed.mockResolvedValue(undefined);
    tasks.settledBy.mockResolvedValue(undefined);
    tasks.markLastAttemptLost.mockResolvedValue({ ...settled, machineId: 'm1' });
    const lost = failed({ willRetry: false, cause: 'container-lost', machineId: 'm2', containerId: 'c2', attempt: 3 });
    expect(await sut.failed(lost, observedAt)).toEqual({ accepted: true });
    expect(published(messaging, TASK_ATTEMPT_ENDED.subject)).toEqual([
      expect.objectContaining({ machineId: 'm1', outcome: 'failed', cause: 'container-lost' }),
    ]);
    expect(waiters.announce).toHaveBeenCalledWith(expect.objectContaining({ state: 'ERROR' }));
  });
});

describe('TaskTransitions.completed', () => {
  it('stores the result inline, wakes the waiters, announces COMPLETE and tells metering', async () => {
    const { sut, tasks, messaging, waiters } = await transitions();
    tasks.complete.mockResolvedValue({ ...settled, id: 't1' } as never);
    expect(await sut.completed(completed(), observedAt)).toEqual({ accepted: true });
    expect(tasks.complete).toHaveBeenCalledWith(expect.objectContaining({ resultJson: '{"answer":42}', resultRef: null }));
    expect(waiters.wake).toHaveBeenCalledWith('t1', expect.anything());
    expect(waiters.announce).toHaveBeenCalledWith(expect.objectContaining({ state: 'COMPLETE' }));
    expect(published(messaging, TASK_ATTEMPT_ENDED.subject)).toEqual([
      expect.objectContaining({ outcome: 'completed', machineId: 'm1', durationMs: 20_000 }),
    ]);
  });

  it('caps a claimed duration at what the control plane saw of the lease', async () => {
    const { sut, tasks, messaging } = await transitions();
    tasks.complete.mockResolvedValue({ ...settled, startedAt: new Date('2026-01-01T00:00:45.000Z') } as never);
    await sut.completed(completed({ durationMs: 3_600_000 }), observedAt);
    expect(published(messaging, TASK_ATTEMPT_ENDED.subject)).toEqual([expect.objectContaining({ durationMs: 5_000 })]);
  });

  it("refuses a result that points at another attempt's (or tenant's) object, writing nothing", async () => {
    const { sut, tasks } = await transitions();
    const verdict = await sut.completed(completed({ result: undefined, resultRef: 'other-task.2' }), observedAt);
    expect(verdict).toMatchObject({ accepted: false, why: 'foreign-result' });
    expect(tasks.complete).not.toHaveBeenCalled();
  });

  it('takes one completion per task: a second one is refused as final and wakes no one', async () => {
    const { sut, tasks, waiters } = await transitions();
    tasks.complete.mockResolvedValue(undefined);
    tasks.settledBy.mockResolvedValue(undefined);
    tasks.leaseOf.mockResolvedValue({ state: 'COMPLETE', attempts: 1, machineId: 'm1', containerId: 'c1' } as never);
    expect(await sut.completed(completed(), observedAt)).toMatchObject({ accepted: false, why: 'final' });
    expect(waiters.wake).not.toHaveBeenCalled();
    expect(waiters.announce).not.toHaveBeenCalled();
  });

  it('waits for the start of the same attempt being recorded, so its outcome finds the lease', async () => {
    const { sut, tasks } = await transitions();
    let recordStart!: (v: StartedOver) => void;
    tasks.markStarted.mockReturnValue(new Promise((r) => (recordStart = r)));
    tasks.complete.mockResolvedValue({ ...settled } as never);
    const starting = sut.started(started({ attempt: 1, machineId: 'm1', containerId: 'c1' }), observedAt);
    const completing = sut.completed(completed(), observedAt);
    await new Promise((r) => setImmediate(r));
    expect(tasks.complete).not.toHaveBeenCalled();
    recordStart({ was: 'PENDING', wasAttempt: 0, wasMachine: null } as StartedOver);
    await Promise.all([starting, completing]);
    expect(tasks.complete).toHaveBeenCalledTimes(1);
  });
});

describe('TaskTransitions.completed withStart (an attempt that ended before its start was reported)', () => {
  const quick = (over: Partial<TaskCompleted> = {}) =>
    completed({ withStart: true, durationMs: 3, completedAt: observedAt.toISOString(), ...over });
  const before = {
    was: 'PENDING',
    wasAttempt: 0,
    wasMachine: null,
    wasContainer: null,
    wasStartedAt: null,
    workspaceId: 'w1',
    deploymentId: 'd1',
  };

  it('records start and result in one, the start no earlier than the agent may hold one back, and tells metering a bounded attempt', async () => {
    const { sut, tasks, messaging, waiters } = await transitions();
    const startedAt = new Date(observedAt.getTime() - 3);
    tasks.startAndComplete.mockResolvedValue({ task: { ...settled, startedAt, id: 't1' } as never, before: before as StartedOver });
    expect(await sut.completed(quick(), observedAt)).toEqual({ accepted: true });
    expect(tasks.complete).not.toHaveBeenCalled();
    expect(tasks.startAndComplete).toHaveBeenCalledWith(
      expect.objectContaining({ taskId: 't1', attempt: 1, machineId: 'm1', containerId: 'c1', startedAt: startedAt.toISOString() }),
    );
    expect(waiters.wake).toHaveBeenCalledWith('t1', expect.anything());
    expect(published(messaging, TASK_ATTEMPT_ENDED.subject)).toEqual([expect.objectContaining({ outcome: 'completed', durationMs: 3 })]);
    expect(published(messaging, TASK_FAILED.subject)).toEqual([]);
    // A claim of a long run is held to the delay: the control plane never saw this start.
    await sut.completed(quick({ durationMs: 3_600_000 }), observedAt);
    expect(tasks.startAndComplete).toHaveBeenLastCalledWith(
      expect.objectContaining({ startedAt: new Date(observedAt.getTime() - TASK_START_REPORT_DELAY_MS).toISOString() }),
    );
  });

  it('reports the attempt it replaced as lost when that one never ended', async () => {
    const { sut, tasks, messaging } = await transitions();
    const replaced = { ...before, was: 'RUNNING', wasAttempt: 1, wasMachine: 'm1', wasContainer: 'c1', wasStartedAt: settled.startedAt };
    tasks.startAndComplete.mockResolvedValue({ task: { ...settled, machineId: 'm2' } as never, before: replaced as StartedOver });
    expect(await sut.completed(quick({ attempt: 2, machineId: 'm2', containerId: 'c2' }), observedAt)).toEqual({ accepted: true });
    expect(published(messaging, TASK_FAILED.subject)).toEqual([
      expect.objectContaining({ machineId: 'm1', attempt: 1, cause: 'container-lost', willRetry: true }),
    ]);
  });

  it('refuses one from a container not placed for the task, and a repeat of one recorded as final, telling no one', async () => {
    const { sut, tasks, waiters, messaging } = await transitions();
    tasks.startAndComplete.mockResolvedValue(undefined);
    tasks.settledBy.mockResolvedValue(undefined);
    tasks.leaseOf.mockResolvedValue({ state: 'PENDING', attempts: 0, machineId: null, containerId: null } as never);
    expect(await sut.completed(quick({ machineId: 'm9' }), observedAt)).toMatchObject({ accepted: false, why: 'no-placement' });
    tasks.leaseOf.mockResolvedValue({ state: 'COMPLETE', attempts: 1, machineId: 'm1', containerId: 'c1' } as never);
    expect(await sut.completed(quick(), observedAt)).toMatchObject({ accepted: false, why: 'final' });
    expect(waiters.wake).not.toHaveBeenCalled();
    expect(waiters.announce).not.toHaveBeenCalled();
    expect(published(messaging, TASK_ATTEMPT_ENDED.subject)).toEqual([]);
  });
});

describe('TaskTransitions endings by the user or by time', () => {
  it('announces a cancel only when the task was not final', async () => {
    const { sut, tasks, waiters } = await transitions();
    tasks.cancel.mockResolvedValueOnce(undefined);
    expect(await sut.cancel('t1', 'w1')).toBeUndefined();
    expect(waiters.announce).not.toHaveBeenCalled();
    const endedAt = new Date('2026-01-01T00:02:00.000Z');
    tasks.cancel.mockResolvedValueOnce({ id: 't1', workspaceId: 'w1', streamSeq: 7, endedAt } as never);
    await sut.cancel('t1', 'w1');
    expect(waiters.announce).toHaveBeenCalledWith({ taskId: 't1', workspaceId: 'w1', state: 'CANCELLED', endedAt: endedAt.toISOString() });
  });

  it('announces every task expired past its ttl, each to its own workspace', async () => {
    const { sut, tasks, waiters } = await transitions();
    const endedAt = new Date();
    tasks.expirePastTtl.mockResolvedValue([
      { id: 't1', workspaceId: 'w1', streamSeq: 1, endedAt },
      { id: 't2', workspaceId: 'w2', streamSeq: 2, endedAt },
    ]);
    expect(await sut.expire(10)).toHaveLength(2);
    expect(waiters.announce.mock.calls.map(([e]) => [e.state, e.workspaceId])).toEqual([
      ['EXPIRED', 'w1'],
      ['EXPIRED', 'w2'],
    ]);
  });
});
