import { Readable } from 'node:stream';
import { Controller, Delete, Get, HttpCode, Param, Post, Query, Req, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiProduces, ApiTags } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { CurrentPrincipal, type Principal } from '../auth/principal.js';
import { versionPin } from '../tasks/version-pin.js';
import { MapResultsQuery, StartMapQuery } from './dto/start-map.query.js';
import { MapsService } from './maps.service.js';

@ApiTags('functions')
@ApiBearerAuth()
@Controller()
export class MapsController {
  constructor(private readonly maps: MapsService) {}

  @Post('function/:name/map')
  @HttpCode(202)
  @ApiOperation({
    summary: 'Map a function over many inputs, server-side, in chunks',
    description:
      'The body is the inputs, streamed: a JSON array of objects, or NDJSON with one object per line (at most 1,000,000). Answers 202 {map_id, total} once every input is durably accepted. chunk_size inputs run as one task (the handler called once per input); return_exceptions keeps failed inputs in place instead of failing the map; order (input or completion) orders /results. 400 bad JSON, an input not an object, or no inputs; 404 unknown function; 413 too many inputs or an input (or chunk) over 512 KiB.',
  })
  start(@CurrentPrincipal() p: Principal, @Param('name') name: string, @Query() q: StartMapQuery, @Req() req: FastifyRequest) {
    return this.maps.start(p, name, undefined, bodyStream(req), q);
  }

  @Post('function/:name/:version/map')
  @HttpCode(202)
  @ApiOperation({ summary: 'Map one version of a function (`/function/<name>/v<N>/map`); as POST /function/<name>/map' })
  startVersion(
    @CurrentPrincipal() p: Principal,
    @Param('name') name: string,
    @Param('version') version: string,
    @Query() q: StartMapQuery,
    @Req() req: FastifyRequest,
  ) {
    return this.maps.start(p, name, versionPin(version, '/function/<name>/map or /function/<name>/v<N>/map'), bodyStream(req), q);
  }

  @Get('api/v1/maps/:id')
  @ApiOperation({
    summary: 'A map: inputs by state (pending, running, succeeded, failed, cancelled), started/ended times, inputs per second',
  })
  get(@CurrentPrincipal() p: Principal, @Param('id') id: string) {
    return this.maps.get(p, id);
  }

  @Get('api/v1/maps/:id/results')
  @ApiProduces('application/x-ndjson')
  @ApiOperation({
    summary: "A map's outcomes as NDJSON lines {index, status, result|error}, streamed while it runs",
    description:
      'In input order each line comes once every line before it is out (order=completion: as chunks finish). The stream ends after the last input. A client that lost the connection asks again with from=<lines it has> and gets each remaining line once.',
  })
  async results(@CurrentPrincipal() p: Principal, @Param('id') id: string, @Query() q: MapResultsQuery, @Res() reply: FastifyReply) {
    const lines = await this.maps.results(p, id, q.from ?? 0);
    return reply.type('application/x-ndjson').send(Readable.from(lines));
  }

  @Delete('api/v1/maps/:id')
  @ApiOperation({ summary: 'Cancel a map: chunks not started never run, running ones are stopped; 409 when it already ended' })
  cancel(@CurrentPrincipal() p: Principal, @Param('id') id: string) {
    return this.maps.cancel(p, id);
  }
}

function bodyStream(req: FastifyRequest): Readable {
  return req.body instanceof Readable ? req.body : Readable.from([]);
}
