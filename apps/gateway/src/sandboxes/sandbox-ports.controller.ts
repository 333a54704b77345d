import { All, Controller, Req, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { CurrentPrincipal, type Principal } from '../auth/principal.js';
import { SandboxCallsService } from './sandbox-calls.service.js';

@ApiTags('sandboxes')
@ApiBearerAuth()
@Controller('sandbox')
export class SandboxPortsController {
  constructor(private readonly calls: SandboxCallsService) {}

  @All([':id/:port', ':id/:port/*'])
  @ApiOperation({
    summary: "A request to a sandbox's exposed port",
    description:
      'Passed byte for byte to `<port>` inside the sandbox (gateway → NATS → agent → the sandbox), its answer streamed back. 404 unknown sandbox or a port not exposed, 409 ended sandbox, 502 nothing listening.',
  })
  forward(@CurrentPrincipal() p: Principal, @Req() request: FastifyRequest, @Res() reply: FastifyReply) {
    return this.calls.forwardToPort(p, request, reply);
  }
}
