import { All, Controller, Req, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { STATUS_CODES } from 'node:http';
import { CurrentPrincipal, type Principal } from '../auth/principal.js';
import { EndpointHttpError, EndpointsService } from './endpoints.service.js';

@ApiTags('endpoints')
@ApiBearerAuth()
@Controller('endpoint')
export class EndpointsController {
  constructor(private readonly endpoints: EndpointsService) {}

  @All([':name', ':name/*'])
  @ApiOperation({
    summary: 'Invoke an endpoint',
    description:
      'Forwards the request, body byte-for-byte, to the least-loaded ready container of the deployment (`/endpoint/<name>/v<N>/…` pins a version) and streams its response back. 404 unknown deployment, 413 body over 16 MiB, 429 buffer full, 503 stopped, 504 no container within the timeout. Every response has `x-tern-request-id`.',
  })
  async invoke(@CurrentPrincipal() principal: Principal, @Req() request: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    try {
      await this.endpoints.forward(principal, request, reply);
    } catch (e) {
      if (reply.sent) return;
      const status = e instanceof EndpointHttpError ? e.status : 500;
      const message = e instanceof EndpointHttpError ? e.message : 'internal error';
      void reply.code(status).send({ statusCode: status, error: STATUS_CODES[status] ?? 'Error', message });
      if (!(e instanceof EndpointHttpError)) throw e;
    }
  }
}
