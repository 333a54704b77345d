import { Readable } from 'node:stream';
import {
  BadRequestException,
  ConflictException,
  Controller,
  ForbiddenException,
  HttpCode,
  NotFoundException,
  Param,
  ParseIntPipe,
  PayloadTooLargeException,
  Put,
  Req,
  UnsupportedMediaTypeException,
  UseGuards,
} from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import { TASK_RESULT_MAX_BYTES } from '#tern/contracts';
import { Messaging, putTaskResult } from '#tern/messaging';
import { Public } from '#tern/observability';
import { type Machine, TasksRepository } from '#tern/persistence';
import { holdsOpenLease } from '#tern/tasks';
import { CurrentMachine, MachineTokenOnly } from '../machine-registration/machine-caller.js';
import { MachineCallerGuard } from '../machine-registration/machine-caller.guard.js';
import { readBounded } from '../read-bounded.js';

function tooLarge(detail: string): PayloadTooLargeException {
  return new PayloadTooLargeException(`task results are limited to ${TASK_RESULT_MAX_BYTES} bytes (${detail})`);
}

/**
 * Large task results from the machine running the attempt: accepted only from the machine holding
 * the lease of that attempt (recorded at task.started), stored once as `<taskId>.<attempt>` in the
 * `results` store, which the completion event then names as its resultRef.
 */
@ApiTags('machine agent')
@ApiBearerAuth()
@Public()
@UseGuards(MachineCallerGuard)
@MachineTokenOnly()
@Controller('api/v1/agent/tasks')
export class AgentResultsController {
  constructor(
    private readonly tasks: TasksRepository,
    private readonly messaging: Messaging,
  ) {}

  @Put(':taskId/attempts/:attempt/result')
  @HttpCode(201)
  @ApiOperation({
    summary: `Store the result (application/octet-stream, the JSON bytes, at most ${TASK_RESULT_MAX_BYTES} bytes) of a task attempt leased to the calling machine; once (409 after)`,
  })
  async put(
    @CurrentMachine() machine: Machine,
    @Param('taskId') taskId: string,
    @Param('attempt', ParseIntPipe) attempt: number,
    @Req() req: FastifyRequest,
  ): Promise<{ resultRef: string }> {
    const lease = await this.tasks.leaseOf(taskId);
    if (!lease) throw new NotFoundException(`task ${taskId} not found`);
    if (!holdsOpenLease(lease, machine.id, attempt)) {
      throw new ForbiddenException(`attempt ${attempt} of task ${taskId} is not leased to this machine (now, or yet)`);
    }
    if (!(req.body instanceof Readable)) {
      throw new UnsupportedMediaTypeException(
        `send the result as application/octet-stream (got ${req.headers['content-type'] ?? 'no content type'})`,
      );
    }
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > TASK_RESULT_MAX_BYTES) throw tooLarge(`content-length ${declared}`);
    const bytes = await readBounded(req.body, TASK_RESULT_MAX_BYTES, tooLarge);
    try {
      JSON.parse(bytes.toString('utf8'));
    } catch {
      throw new BadRequestException(['the result is not JSON']);
    }
    const name = await putTaskResult(this.messaging, taskId, attempt, bytes);
    if (!name) throw new ConflictException(`the result of attempt ${attempt} of task ${taskId} is stored already`);
    return { resultRef: name };
  }
}
