import { Controller, Param, Post, Query, Req, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { CallView } from '#tern/contracts';
import { CurrentPrincipal, type Principal } from '../auth/principal.js';
import { versionPin } from '../tasks/version-pin.js';
import { CallsService } from './calls.service.js';
import { CallFunctionQuery } from './dto/call-function.query.js';

@ApiTags('functions')
@ApiBearerAuth()
@Controller('function')
export class FunctionsController {
  constructor(private readonly calls: CallsService) {}

  @Post(':name')
  @ApiOperation({
    summary: 'Call a function once',
    description:
      "The body, any JSON value but null (empty means {}), is the handler's one argument. Waits up to `wait` seconds (default 60, at most 300) and answers 200 {call_id, status, result} when the call ended by then, else 202 {call_id, status}: read it later at GET /api/v1/calls/<id>[/wait]. max_retries, timeout, ttl override the function's task policy for this call. 400 not JSON, 404 unknown function, 413 input over 512 KiB, 429 too many calls waiting, 503 stopped.",
  })
  call(
    @CurrentPrincipal() p: Principal,
    @Param('name') name: string,
    @Query() q: CallFunctionQuery,
    @Req() req: FastifyRequest,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    return answered(reply, this.calls.call(p, name, undefined, bodyOf(req), q));
  }

  @Post(':name/:version')
  @ApiOperation({ summary: 'Call one version of a function (`/function/<name>/v<N>`); as POST /function/<name>' })
  callVersion(
    @CurrentPrincipal() p: Principal,
    @Param('name') name: string,
    @Param('version') version: string,
    @Query() q: CallFunctionQuery,
    @Req() req: FastifyRequest,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    const pinned = versionPin(version, '/function/<name>, /function/<name>/v<N> or /function/<name>/map');
    return answered(reply, this.calls.call(p, name, pinned, bodyOf(req), q));
  }
}

/** 200 once the call has ended, 202 while it still runs. */
async function answered(reply: FastifyReply, view: Promise<CallView>): Promise<CallView> {
  const v = await view;
  void reply.code(v.done ? 200 : 202);
  return v;
}

function bodyOf(req: FastifyRequest): Buffer {
  return Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
}
