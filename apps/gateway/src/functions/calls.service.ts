import { Injectable } from '@nestjs/common';
import type { CallView } from '#tern/contracts';
import type { Principal } from '../auth/principal.js';
import { TaskSubmissionService } from '../tasks/task-submission.service.js';
import { TasksService } from '../tasks/tasks.service.js';
import { callView } from './call-views.js';
import { type CallFunctionQuery, DEFAULT_CALL_WAIT_SECONDS } from './dto/call-function.query.js';

/**
 * One call of a function: a task on its queue (durable, retried, one recorded result), which the
 * request then waits for. A caller who leaves early loses nothing: the call runs and is read later.
 */
@Injectable()
export class CallsService {
  constructor(
    private readonly submissions: TaskSubmissionService,
    private readonly tasks: TasksService,
  ) {}

  async call(principal: Principal, name: string, version: number | undefined, body: Buffer, q: CallFunctionQuery): Promise<CallView> {
    const { wait, ...overrides } = q;
    const submitted = await this.submissions.submit(principal, name, version, body, overrides, 'function');
    return this.wait(principal, submitted.task_id, wait ?? DEFAULT_CALL_WAIT_SECONDS);
  }

  async get(principal: Principal, id: string): Promise<CallView> {
    return callView(await this.tasks.get(principal, id, 'call'));
  }

  async wait(principal: Principal, id: string, timeoutSeconds: number): Promise<CallView> {
    return callView(await this.tasks.wait(principal, id, timeoutSeconds, 'call'));
  }
}
