import { Controller, ForbiddenException, Get, Headers, Query, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { OperatorOnly } from '../auth/roles.decorator.js';
import { CurrentPrincipal, type Principal } from '../auth/principal.js';
import { RewardsQuery, UsageQuery } from './dto/usage.query.js';
import { rewardsCsv, usageCsv } from './usage-csv.js';
import { UsageService } from './usage.service.js';
import { usageWindow } from './usage-window.js';

function wantsCsv(format: string | undefined, accept: string | undefined): boolean {
  return format === 'csv' || (format === undefined && /\btext\/csv\b/.test(accept ?? ''));
}

@ApiTags('usage')
@ApiBearerAuth()
@Controller('api/v1/usage')
export class UsageController {
  constructor(private readonly usage: UsageService) {}

  @Get()
  @ApiOperation({
    summary: 'GPU-, CPU-core- and memory-GiB-seconds and task counts per workspace, deployment, machine or GPU type, by hour or day',
  })
  async report(
    @Query() query: UsageQuery,
    @CurrentPrincipal() principal: Principal,
    @Headers('accept') accept: string | undefined,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    const window = usageWindow(query);
    let workspace = query.workspace ?? null;
    if (principal.role !== 'operator') {
      if (workspace && workspace !== principal.workspaceId)
        throw new ForbiddenException('this action needs an operator token: a workspace token sees the usage of its own workspace only');
      if (query.group_by === 'machine')
        throw new ForbiddenException('this action needs an operator token: usage by machine spans workspaces');
      workspace = principal.workspaceId;
    }
    const report = await this.usage.usage(window, query.group_by ?? 'workspace', query.granularity ?? null, workspace);
    if (!wantsCsv(query.format, accept)) return report;
    reply.header('content-type', 'text/csv; charset=utf-8');
    return usageCsv(report.rows);
  }

  @Get('rewards')
  @OperatorOnly()
  @ApiOperation({ summary: "Each machine's share of the GPU-seconds served in a period, weighted by its reputation (operator)" })
  async rewards(
    @Query() query: RewardsQuery,
    @Headers('accept') accept: string | undefined,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    const report = await this.usage.rewards(usageWindow(query), query.amount);
    if (!wantsCsv(query.format, accept)) return report;
    reply.header('content-type', 'text/csv; charset=utf-8');
    return rewardsCsv(report.machines);
  }
}
