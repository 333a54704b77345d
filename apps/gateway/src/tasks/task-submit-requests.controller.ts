import { Controller, HttpException } from '@nestjs/common';
import { Ctx, Payload } from '@nestjs/microservices';
import { TASK_SUBMIT, TaskSubmit, type TaskSubmitReply } from '#tern/contracts';
import { type JetStreamContext, OnRequest, ReplyError } from '#tern/messaging';
import { TaskSubmissionService } from './task-submission.service.js';

/** Index of the workspace id in `tern.workspace.<workspace id>.task.submit.v1`. */
const WORKSPACE_TOKEN = 2;

/**
 * Task submission over NATS, the integrators' door: the same submit as POST /taskqueue/<name>,
 * for the workspace the subject names. NATS lets an integrator's user publish only its own
 * workspace's subject, so the subject is who is asking; the payload names no workspace.
 */
@Controller()
export class TaskSubmitRequestsController {
  constructor(private readonly submission: TaskSubmissionService) {}

  @OnRequest(TASK_SUBMIT)
  async submit(@Payload() request: TaskSubmit, @Ctx() ctx: JetStreamContext): Promise<TaskSubmitReply> {
    const workspaceId = ctx.subject.split('.')[WORKSPACE_TOKEN];
    try {
      const submitted = await this.submission.submit(
        { workspaceId },
        request.queue,
        request.version,
        Buffer.from(JSON.stringify(request.payload ?? {})),
        {
          ...(request.maxRetries !== undefined ? { max_retries: request.maxRetries } : {}),
          ...(request.timeoutSeconds !== undefined ? { timeout: request.timeoutSeconds } : {}),
          ...(request.ttlSeconds !== undefined ? { ttl: request.ttlSeconds } : {}),
          ...(request.callbackUrl !== undefined ? { callback_url: request.callbackUrl } : {}),
        },
      );
      return { taskId: submitted.task_id, status: submitted.status, queue: submitted.deployment, version: submitted.version };
    } catch (e) {
      // The HTTP submit's 4xx (unknown queue, bad payload, too many waiting) keep their code and message.
      if (e instanceof HttpException) throw new ReplyError(e.getStatus(), httpMessage(e));
      throw e;
    }
  }
}

function httpMessage(e: HttpException): string {
  const body = e.getResponse();
  return typeof body === 'object' && body !== null && 'message' in body ? String((body as { message: unknown }).message) : e.message;
}
