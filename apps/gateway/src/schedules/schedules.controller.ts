import { Controller, Get } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import { nextTick, type ResolvedSpec, type ScheduleView, scheduleExpression } from '#tern/contracts';
import { SchedulesRepository } from '#tern/persistence';
import { CurrentPrincipal, type Principal } from '../auth/principal.js';

@ApiTags('functions')
@ApiBearerAuth()
@Controller('api/v1/schedules')
export class SchedulesController {
  constructor(private readonly schedules: SchedulesRepository) {}

  @Get()
  @ApiOperation({
    summary: "The workspace's schedules: deployment, expression, timezone, next run, last run and its status; paused while stopped",
  })
  async list(@CurrentPrincipal() p: Principal): Promise<{ schedules: ScheduleView[] }> {
    const now = new Date();
    const schedules: ScheduleView[] = [];
    for (const d of await this.schedules.scheduled(p.workspaceId)) {
      const schedule = (d.spec as unknown as ResolvedSpec).schedule!;
      const active = d.state === 'ready';
      schedules.push({
        deployment: d.name,
        version: d.version,
        expression: scheduleExpression(schedule),
        timezone: schedule.timezone,
        catch_up: schedule.catchUp,
        status: active ? 'active' : 'paused',
        next_run: active ? (nextTick(schedule, now)?.toISOString() ?? null) : null,
        last_run: d.lastTickAt?.toISOString() ?? null,
        last_status: d.lastTaskState,
        last_task_id: d.lastTaskId,
      });
    }
    return { schedules };
  }
}
