import { All, Controller, Req, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Public } from '#tern/observability';
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
      'Passed byte for byte to `<port>` inside the sandbox (gateway → NATS → agent → the sandbox), its answer streamed back; a WebSocket (an upgrade request) is carried both ways in a tunnel. 404 unknown sandbox or a port not exposed, 409 ended sandbox, 502 nothing listening.',
  })
  forward(@CurrentPrincipal() p: Principal, @Req() request: FastifyRequest, @Res() reply: FastifyReply) {
    return this.calls.forwardToPort(p, request, reply);
  }
}

/** Public ports: the unguessable URL is the only credential, so no workspace token is asked. */
@ApiTags('sandboxes')
@Controller('sandbox-public')
export class SandboxPublicPortsController {
  constructor(private readonly calls: SandboxCallsService) {}

  @Public()
  @All([':token', ':token/*'])
  @ApiOperation({
    summary: "A request to a sandbox's public port",
    description:
      'As `/sandbox/<id>/<port>/…` (HTTP and WebSocket), without a token: the URL `POST /api/v1/sandboxes/<id>/ports {port, public: true}` answered is the credential. 404 for any other URL, or once the sandbox has ended.',
  })
  forward(@Req() request: FastifyRequest, @Res() reply: FastifyReply) {
    return this.calls.forwardToPublicPort(request, reply);
  }
}
