import { Controller, Delete, Get, Param, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import { CurrentPrincipal, type Principal } from '../auth/principal.js';
import { ListTasksQuery } from './dto/list-tasks.query.js';
import { TaskStatsQuery } from './dto/task-stats.query.js';
import { WaitTaskQuery } from './dto/wait-task.query.js';
import { TasksService } from './tasks.service.js';

@ApiTags('tasks')
@ApiBearerAuth()
@Controller('api/v1/tasks')
export class TasksController {
  constructor(private readonly tasks: TasksService) {}

  @Get()
  @ApiOperation({
    summary: 'Tasks of the workspace, newest first; filter by deployment and status (comma-separated); paged with next_cursor',
  })
  list(@CurrentPrincipal() p: Principal, @Query() q: ListTasksQuery) {
    return this.tasks.list(p, q);
  }

  @Get('stats')
  @ApiOperation({
    summary:
      'Tasks of the workspace (or one deployment) by current state, and per minute over the last `minutes` (default 60): submitted, completed, failed',
  })
  stats(@CurrentPrincipal() p: Principal, @Query() q: TaskStatsQuery) {
    return this.tasks.stats(p, q.deployment, q.minutes ?? 60);
  }

  @Get(':id')
  @ApiOperation({ summary: 'One task: status, timestamps, attempts, and its result or error' })
  get(@CurrentPrincipal() p: Principal, @Param('id') id: string) {
    return this.tasks.get(p, id);
  }

  @Get(':id/wait')
  @ApiOperation({
    summary:
      'Long poll: answers as soon as the task ends, or after `timeout` seconds (default 30) with its current state; `done` says which',
  })
  wait(@CurrentPrincipal() p: Principal, @Param('id') id: string, @Query() q: WaitTaskQuery) {
    return this.tasks.wait(p, id, q.timeout ?? 30);
  }

  @Delete(':id')
  @ApiOperation({ summary: 'Cancel: a pending task never runs, a running one is stopped; 409 when it already ended' })
  cancel(@CurrentPrincipal() p: Principal, @Param('id') id: string) {
    return this.tasks.cancel(p, id);
  }
}
