import type { TaskView } from '#tern/contracts';
import { newTestService } from '../../../../test/support/test-service.js';
import type { Principal } from '../auth/principal.js';
import { TaskSubmissionService } from '../tasks/task-submission.service.js';
import { TasksService } from '../tasks/tasks.service.js';
import { CallsService } from './calls.service.js';
import { DEFAULT_CALL_WAIT_SECONDS } from './dto/call-function.query.js';

const principal: Principal = { workspaceId: 'w1', workspaceName: 'team', tokenId: 'tok1', role: 'admin' };

async function calls() {
  const { sut, fake } = await newTestService(CallsService);
  const submissions = fake(TaskSubmissionService);
  submissions.submit.mockResolvedValue({ task_id: 't-1' } as never);
  const tasks = fake(TasksService);
  tasks.wait.mockResolvedValue({ task_id: 't-1', deployment: 'resize', version: 1, status: 'COMPLETE' } as Partial<TaskView> as TaskView);
  return { sut, submissions, tasks };
}

describe('CallsService.call', () => {
  it('submits the call as a function task with its policy overrides, not its wait, and waits for that task', async () => {
    const { sut, submissions, tasks } = await calls();
    const body = Buffer.from('{}');
    const view = await sut.call(principal, 'resize', undefined, body, { wait: 5, max_retries: 0 } as never);
    expect(submissions.submit).toHaveBeenCalledWith(principal, 'resize', undefined, body, { max_retries: 0 }, 'function');
    expect(tasks.wait).toHaveBeenCalledWith(principal, 't-1', 5, 'call');
    expect(view).toMatchObject({ call_id: 't-1', function: 'resize', status: 'COMPLETE' });
  });

  it(`holds the request ${DEFAULT_CALL_WAIT_SECONDS} s when the caller names no wait, and not at all for wait=0`, async () => {
    const { sut, tasks } = await calls();
    await sut.call(principal, 'resize', 2, Buffer.alloc(0), {} as never);
    await sut.call(principal, 'resize', 2, Buffer.alloc(0), { wait: 0 } as never);
    expect(tasks.wait.mock.calls.map((c) => c[2])).toEqual([DEFAULT_CALL_WAIT_SECONDS, 0]);
  });

  it("reads only calls, not the workspace's other tasks", async () => {
    const { sut, tasks } = await calls();
    tasks.get.mockResolvedValue({ task_id: 't-1' } as Partial<TaskView> as TaskView);
    await sut.get(principal, 't-1');
    expect(tasks.get).toHaveBeenCalledWith(principal, 't-1', 'call');
  });
});
