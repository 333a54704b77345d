import { Controller, HttpCode, Param, Post, Query, Req } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import { CurrentPrincipal, type Principal } from '../auth/principal.js';
import { SubmitTaskQuery } from './dto/submit-task.query.js';
import { TaskSubmissionService } from './task-submission.service.js';
import { versionPin } from './version-pin.js';

@ApiTags('tasks')
@ApiBearerAuth()
@Controller('taskqueue')
export class TaskQueueController {
  constructor(private readonly submissions: TaskSubmissionService) {}

  @Post(':name')
  @HttpCode(202)
  @ApiOperation({
    summary: 'Submit a task to a task queue',
    description:
      "The body, any JSON value but null (empty means {}), is the handler's one argument. Answers 202 {task_id}. Query parameters override the queue's task policy for this task: max_retries, timeout, ttl (seconds), callback_url. 400 not JSON, 404 unknown queue, 413 payload over 512 KiB, 429 max_pending_tasks reached, 503 stopped.",
  })
  submit(@CurrentPrincipal() p: Principal, @Param('name') name: string, @Query() q: SubmitTaskQuery, @Req() req: FastifyRequest) {
    return this.submissions.submit(p, name, undefined, bodyOf(req), q);
  }

  @Post(':name/:version')
  @HttpCode(202)
  @ApiOperation({ summary: 'Submit a task to one version of a task queue (`/taskqueue/<name>/v<N>`)' })
  submitToVersion(
    @CurrentPrincipal() p: Principal,
    @Param('name') name: string,
    @Param('version') version: string,
    @Query() q: SubmitTaskQuery,
    @Req() req: FastifyRequest,
  ) {
    return this.submissions.submit(p, name, versionPin(version, '/taskqueue/<name> or /taskqueue/<name>/v<N>'), bodyOf(req), q);
  }
}

function bodyOf(req: FastifyRequest): Buffer {
  return Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
}
