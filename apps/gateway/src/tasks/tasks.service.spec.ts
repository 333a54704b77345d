import { jest } from '@jest/globals';
import { AGENT_TASK_CANCEL, TASK_CANCELLED, taskConsumerName } from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import { DeploymentsRepository, TasksRepository, type TaskWithDeployment } from '#tern/persistence';
import { newTestService } from '../../../../test/support/test-service.js';
import type { Principal } from '../auth/principal.js';
import { TaskSubmissionService } from './task-submission.service.js';
import { TaskTransitions } from './task-transitions.js';
import { TasksService } from './tasks.service.js';

const principal: Principal = { workspaceId: 'w1', workspaceName: 'team', tokenId: 'tok1', role: 'member' };
const ID = '6f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f';
const B = ID.replace('6f', '5f');
const row = (over: Partial<TaskWithDeployment> = {}) =>
  ({ id: ID, deploymentName: 'queue', version: 1, state: 'PENDING', attempts: 0, createdAt: new Date(0), ...over }) as TaskWithDeployment;

async function tasks() {
  const { sut, fake } = await newTestService(TasksService);
  const repo = fake(TasksRepository);
  repo.findInWorkspace.mockImplementation(async (id, workspaceId) => (id === ID && workspaceId === 'w1' ? row() : undefined));
  const messaging = fake(Messaging);
  const deleteMessage = jest.fn(async () => true);
  const deleteConsumer = jest.fn(async (_stream: string, _name: string) => true);
  Object.defineProperty(messaging, 'ns', { value: { stream: (name: string) => `ns-${name}`, subject: (s: string) => s } });
  messaging.jsm.mockResolvedValue({
    streams: { deleteMessage, getMessage: jest.fn(async () => undefined) },
    consumers: { delete: deleteConsumer },
  } as never);
  messaging.publish.mockResolvedValue(undefined as never);
  return {
    sut,
    repo,
    messaging,
    deleteMessage,
    deleteConsumer,
    transitions: fake(TaskTransitions),
    deployments: fake(DeploymentsRepository),
    submissions: fake(TaskSubmissionService),
  };
}

describe('TasksService.get', () => {
  it('answers 400 naming what a task id looks like, and a call id for a call', async () => {
    const { sut, repo } = await tasks();
    await expect(sut.get(principal, 'nope')).rejects.toMatchObject({
      status: 400,
      message: '"nope" is not a task id (task ids are UUIDs, as POST /taskqueue/<name> returns them)',
    });
    await expect(sut.get(principal, 'nope', 'call')).rejects.toMatchObject({
      message: expect.stringMatching(/as POST \/function\/<name>/),
    });
    expect(repo.findInWorkspace).not.toHaveBeenCalled();
  });

  it("answers 404 for another workspace's task, as for an unknown one", async () => {
    const { sut, repo } = await tasks();
    await expect(sut.get({ ...principal, workspaceId: 'w2', workspaceName: 'rival' }, ID)).rejects.toMatchObject({
      status: 404,
      message: `task ${ID} not found in workspace rival`,
    });
    expect(repo.findInWorkspace).toHaveBeenCalledWith(ID, 'w2', true);
    expect(await sut.get(principal, ID)).toMatchObject({ task_id: ID, status: 'PENDING', done: false });
  });

  it('answers a completed task with its stored result', async () => {
    const { sut, repo } = await tasks();
    repo.findInWorkspace.mockResolvedValue(row({ state: 'COMPLETE', result: { ok: 1 }, resultRef: null }));
    expect(await sut.get(principal, ID)).toMatchObject({ done: true, result: { ok: 1 } });
  });
});

describe('TasksService.list and stats', () => {
  it('refuses a cursor that is not a next_cursor with a 400, and pages with one row more than asked', async () => {
    const { sut, repo } = await tasks();
    await expect(sut.list(principal, { cursor: 'garbage' })).rejects.toMatchObject({
      status: 400,
      message: 'cursor must be the next_cursor of a previous page',
    });
    repo.listForWorkspace.mockResolvedValue([row(), row({ id: B }), row({ id: ID.replace('6f', '7f') })]);
    const page = await sut.list(principal, { limit: 2 });
    expect(page.tasks).toHaveLength(2);
    expect(page.next_cursor).toEqual(expect.any(String));
    expect(repo.listForWorkspace).toHaveBeenCalledWith('w1', expect.anything(), 3);
    const next = await sut.list(principal, { limit: 2, cursor: page.next_cursor! });
    expect(repo.listForWorkspace).toHaveBeenLastCalledWith(
      'w1',
      expect.objectContaining({ before: { createdAt: expect.any(String), id: B } }),
      3,
    );
    expect(next.tasks).toHaveLength(2);
  });

  it('answers 404 for the stats of a deployment the workspace does not have, or deleted', async () => {
    const { sut, deployments, repo } = await tasks();
    deployments.findByName.mockResolvedValue({ state: 'deleted' } as never);
    await expect(sut.stats(principal, 'gone', 60)).rejects.toMatchObject({
      status: 404,
      message: 'deployment "gone" not found in workspace "team"',
    });
    expect(repo.activity).not.toHaveBeenCalled();
  });
});

describe('TasksService.cancel', () => {
  it('answers 409 for a task that already ended, publishing nothing', async () => {
    const { sut, repo, transitions, messaging } = await tasks();
    repo.findInWorkspace.mockResolvedValue(row({ state: 'COMPLETE' }));
    transitions.cancel.mockResolvedValue(undefined);
    await expect(sut.cancel(principal, ID)).rejects.toMatchObject({
      status: 409,
      message: `task ${ID} already ended (COMPLETE): nothing to cancel`,
    });
    expect(transitions.cancel).toHaveBeenCalledWith(ID, 'w1');
    expect(messaging.publish).not.toHaveBeenCalled();
  });

  it("deletes a running task's message, publishes task.cancelled to its workspace and tells only its machine to stop it", async () => {
    const { sut, transitions, messaging, deleteMessage } = await tasks();
    transitions.cancel.mockResolvedValue({
      id: ID,
      was: 'RUNNING',
      machineId: 'm1',
      attempts: 2,
      deploymentId: 'd1',
      version: 1,
      streamSeq: 41,
    } as never);
    await sut.cancel(principal, ID);
    expect(deleteMessage).toHaveBeenCalledWith('ns-TASKS', 41, false);
    expect(messaging.publish).toHaveBeenCalledWith(
      TASK_CANCELLED,
      expect.objectContaining({ taskId: ID, workspaceId: 'w1', wasRunning: true, reason: 'cancelled by the user' }),
      { msgId: `${ID}:cancelled`, tokens: ['w1'] },
    );
    expect(messaging.emit).toHaveBeenCalledWith(AGENT_TASK_CANCEL, { taskId: ID, attempt: 2, reason: 'cancelled by the user' }, ['m1']);
  });

  it('finds the stream sequence of a task answered a moment ago, and tells no machine of a pending one', async () => {
    const { sut, transitions, messaging, submissions, deleteMessage } = await tasks();
    transitions.cancel.mockResolvedValue({
      id: ID,
      was: 'PENDING',
      machineId: null,
      attempts: 0,
      deploymentId: 'd1',
      version: 1,
      streamSeq: null,
    } as never);
    submissions.sequenceInFlight.mockResolvedValue(7 as never);
    await sut.cancel(principal, ID);
    expect(submissions.sequenceInFlight).toHaveBeenCalledWith(ID);
    expect(deleteMessage).toHaveBeenCalledWith('ns-TASKS', 7, false);
    expect(messaging.emit).not.toHaveBeenCalled();
  });
});

describe('TasksService.dropQueue', () => {
  it("cancels the deleted queue's unfinished tasks and removes the consumer of every version", async () => {
    const { sut, transitions, deleteConsumer } = await tasks();
    transitions.cancelAllOf.mockResolvedValue(5);
    expect(await sut.dropQueue('d1', 3)).toBe(5);
    expect(transitions.cancelAllOf).toHaveBeenCalledWith('d1', 'cancelled: its task queue was deleted');
    expect(deleteConsumer.mock.calls).toEqual([1, 2, 3].map((v) => ['ns-TASKS', taskConsumerName('d1', v)]));
  });
});
