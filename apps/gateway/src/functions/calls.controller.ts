import { Controller, Get, Param, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import { CurrentPrincipal, type Principal } from '../auth/principal.js';
import { WaitTaskQuery } from '../tasks/dto/wait-task.query.js';
import { CallsService } from './calls.service.js';

@ApiTags('functions')
@ApiBearerAuth()
@Controller('api/v1/calls')
export class CallsController {
  constructor(private readonly calls: CallsService) {}

  @Get(':id')
  @ApiOperation({ summary: 'One function call: status, timestamps, attempts, and its result or error' })
  get(@CurrentPrincipal() p: Principal, @Param('id') id: string) {
    return this.calls.get(p, id);
  }

  @Get(':id/wait')
  @ApiOperation({
    summary:
      'Long poll: answers as soon as the call ends, or after `timeout` seconds (default 30, at most 300) with its state; `done` says which',
  })
  wait(@CurrentPrincipal() p: Principal, @Param('id') id: string, @Query() q: WaitTaskQuery) {
    return this.calls.wait(p, id, q.timeout ?? 30);
  }
}
