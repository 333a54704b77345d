import { Controller, Param, Post } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import { ApiError } from '#tern/service';
import { CurrentPrincipal, type Principal } from '../auth/principal.js';
import { RoutesMirror, TABLE_NOT_LOADED } from './routes-mirror.js';
import { SocketTickets, TICKET_TTL_SECONDS } from './socket-tickets.js';

@ApiTags('endpoints')
@ApiBearerAuth()
@Controller('api/v1/deployments')
export class SocketTicketsController {
  constructor(
    private readonly tickets: SocketTickets,
    private readonly table: RoutesMirror,
  ) {}

  @Post(':name/socket-tickets')
  @ApiOperation({
    summary: 'A short-lived ticket that opens WebSockets to an endpoint from a browser',
    description: `A browser cannot send an Authorization header with a WebSocket: it sends this ticket instead, as \`?tern_ticket=<ticket>\` on the URL or as the subprotocol \`tern.ticket.<ticket>\` beside its own. Good for ${TICKET_TTL_SECONDS} s, for opening WebSockets to this deployment only (an open one stays open); it stands for the calling token, and dies with it. 404 unknown deployment.`,
  })
  async issue(@CurrentPrincipal() principal: Principal, @Param('name') name: string) {
    if (!(await this.table.ready())) throw new ApiError(503, TABLE_NOT_LOADED);
    if (!this.table.find(principal.workspaceId, name).known) throw new ApiError(404, `deployment "${name}" not found`);
    return this.tickets.issue(principal, name);
  }
}
