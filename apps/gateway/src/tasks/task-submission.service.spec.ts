import { TASK_ITEM, TASK_SUBMITTED } from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import { TasksRepository, type UnsentTask } from '#tern/persistence';
import { deploymentRecord } from '../../../../test/support/deployment-records.js';
import { newTestService } from '../../../../test/support/test-service.js';
import { RoutesMirror } from '../endpoints/routes-mirror.js';
import { TaskSubmissionService } from './task-submission.service.js';

const principal = { workspaceId: 'w1' };
const queue = deploymentRecord({ name: 'square', kind: 'task_queue', task_policy: { max_retries: 2, timeout: 60 }, max_pending_tasks: 5 });

async function submissions(record = queue) {
  const { sut, fake } = await newTestService(TaskSubmissionService);
  const table = fake(RoutesMirror);
  table.ready.mockResolvedValue(true);
  table.find.mockImplementation((workspaceId, name) =>
    workspaceId === record.workspaceId && name === record.name ? { known: true, record } : { known: false },
  );
  const tasks = fake(TasksRepository);
  tasks.createPending.mockImplementation(async (task) => ({ ...task, createdAt: new Date('2026-01-01T00:00:00Z') }) as UnsentTask);
  tasks.markEnqueued.mockResolvedValue(undefined as never);
  const messaging = fake(Messaging);
  messaging.publish.mockResolvedValue({ seq: 41 } as never);
  return { sut, table, tasks, messaging };
}

/** Lets the publish that runs behind the 202 finish. */
const settle = () => new Promise((r) => setTimeout(r, 10));

describe('TaskSubmissionService.submit', () => {
  it("saves the task with the queue's policy, answers PENDING, then sends it to TASKS and records where it went", async () => {
    const { sut, tasks, messaging } = await submissions();
    const answer = await sut.submit(principal, 'square', undefined, Buffer.from('{"x": 3}'), {});
    expect(answer).toEqual({ task_id: expect.any(String), status: 'PENDING', deployment: 'square', version: 1 });
    expect(tasks.createPending).toHaveBeenCalledWith(
      expect.objectContaining({
        id: answer.task_id,
        payload: { x: 3 },
        maxRetries: 2,
        timeoutSeconds: 60,
        ttlSeconds: null,
        callbackUrl: null,
      }),
      5,
    );
    await settle();
    expect(messaging.publish).toHaveBeenCalledWith(TASK_ITEM, expect.objectContaining({ taskId: answer.task_id, payload: { x: 3 } }), {
      tokens: ['d-square', '1'],
      msgId: answer.task_id,
    });
    expect(messaging.publish).toHaveBeenCalledWith(TASK_SUBMITTED, expect.objectContaining({ taskId: answer.task_id, maxRetries: 2 }), {
      msgId: `${answer.task_id}:submitted`,
      tokens: ['w1'],
    });
    expect(tasks.markEnqueued).toHaveBeenCalledWith(answer.task_id, 41);
  });

  it("lets a submit's query override the queue's policy for its task", async () => {
    const { sut, tasks } = await submissions();
    await sut.submit(principal, 'square', undefined, Buffer.alloc(0), {
      max_retries: 0,
      timeout: 5,
      ttl: 30,
      callback_url: 'https://example.com/done',
    });
    expect(tasks.createPending).toHaveBeenCalledWith(
      expect.objectContaining({ payload: {}, maxRetries: 0, timeoutSeconds: 5, ttlSeconds: 30, callbackUrl: 'https://example.com/done' }),
      5,
    );
  });

  it('refuses with 429 what the queue has no room for, and sends nothing', async () => {
    const { sut, tasks, messaging } = await submissions();
    tasks.createPending.mockResolvedValue(undefined);
    await expect(sut.submit(principal, 'square', undefined, Buffer.from('{}'), {})).rejects.toMatchObject({
      status: 429,
      message: expect.stringMatching(/already has 5 tasks waiting .*raise max_pending_tasks/),
    });
    await settle();
    expect(messaging.publish).not.toHaveBeenCalled();
  });

  it.each([
    ['http://10.0.0.7/hook', /10\.0\.0\.7 is a private/],
    ['http://169.254.169.254/latest', /link-local/],
    ['http://[::1]:8080/', /loopback/],
  ])('refuses a callback_url at %s before saving anything', async (url, why) => {
    const { sut, tasks } = await submissions();
    await expect(sut.submit(principal, 'square', undefined, Buffer.from('{}'), { callback_url: url })).rejects.toMatchObject({
      status: 400,
      message: expect.stringMatching(why),
    });
    expect(tasks.createPending).not.toHaveBeenCalled();
  });

  it('keeps a task whose publish failed saved (the relay sends it) and unmarked', async () => {
    const { sut, tasks, messaging } = await submissions();
    messaging.publish.mockRejectedValue(new Error('no JetStream'));
    const answer = await sut.submit(principal, 'square', undefined, Buffer.from('{}'), {});
    expect(answer.status).toBe('PENDING');
    await settle();
    expect(tasks.markEnqueued).not.toHaveBeenCalled();
    expect(await sut.sequenceInFlight(answer.task_id)).toBeUndefined();
  });
});

describe('TaskSubmissionService.queue', () => {
  it('answers 503 until the deployments table is loaded', async () => {
    const { sut, table } = await submissions();
    table.ready.mockResolvedValue(false);
    await expect(sut.queue(principal, 'square', undefined, 'task_queue')).rejects.toMatchObject({ status: 503 });
  });

  it("answers 404 for a name unknown in the caller's workspace, saying how to deploy it", async () => {
    const { sut } = await submissions();
    await expect(sut.queue({ workspaceId: 'w2' }, 'square', undefined, 'task_queue')).rejects.toMatchObject({
      status: 404,
      message: 'task queue "square" not found: deploy it with kind: task_queue first',
    });
  });

  it('answers 400 naming where to call a deployment of another kind', async () => {
    const { sut } = await submissions(deploymentRecord({ name: 'square', kind: 'endpoint' }));
    await expect(sut.queue(principal, 'square', undefined, 'task_queue')).rejects.toMatchObject({
      status: 400,
      message: expect.stringMatching(/is a endpoint, not a task_queue: call it at .*\/endpoint\/square/),
    });
  });

  it('answers 503 for a stopped queue, saying how to start it', async () => {
    const { sut } = await submissions({ ...queue, state: 'stopped' });
    await expect(sut.queue(principal, 'square', undefined, 'task_queue')).rejects.toMatchObject({
      status: 503,
      message: expect.stringMatching(/tern deployment start square/),
    });
  });
});

describe('TaskSubmissionService.enqueue', () => {
  it('answers the sequence of a task still being sent, so a cancel right after its 202 finds its message', async () => {
    const { sut, tasks, messaging } = await submissions();
    let ack!: (v: { seq: number }) => void;
    messaging.publish.mockReturnValueOnce(new Promise((r) => (ack = r)) as never);
    const task = { id: 't1', workspaceId: 'w1', deploymentId: 'd-square', version: 1, createdAt: new Date() } as UnsentTask;
    const enqueued = sut.enqueue(task);
    const seq = sut.sequenceInFlight('t1');
    await settle();
    ack({ seq: 7 });
    expect(await seq).toBe(7);
    await enqueued;
    expect(tasks.markEnqueued).toHaveBeenCalledWith('t1', 7);
  });

  it('declares the version consumer once, and again after a failed declaration', async () => {
    const { sut, messaging } = await submissions();
    const task = { id: 't1', workspaceId: 'w1', deploymentId: 'd-square', version: 1, createdAt: new Date() } as UnsentTask;
    messaging.ensureConsumer.mockRejectedValueOnce(new Error('JetStream away'));
    await expect(sut.send(task)).rejects.toThrow('JetStream away');
    await sut.send(task);
    await sut.send({ ...task, id: 't2' });
    expect(messaging.ensureConsumer).toHaveBeenCalledTimes(2);
  });
});
