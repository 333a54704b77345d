import { Controller, Get, HttpCode, PayloadTooLargeException, Post, Query, Req, Res, StreamableFile, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Readable } from 'node:stream';
import { NETWORK_TEST_HTTP_MAX_BYTES, type NetworkTestSinkResponse } from '#tern/contracts';
import { Public } from '#tern/observability';
import { MachineTokenOnly } from '../machine-registration/machine-caller.js';
import { MachineCallerGuard } from '../machine-registration/machine-caller.guard.js';
import { discardBody } from './discard-body.js';
import { NetworkTestSourceQuery } from './dto/network-test-source.query.js';
import { NetworkTestService } from './network-test.service.js';

/** How much of a refused upload is still read (and thrown away) so that the client sees the 413. */
const REFUSED_UPLOAD_DISCARD = { maxBytes: 2 * NETWORK_TEST_HTTP_MAX_BYTES, maxMs: 10_000 };

/**
 * The HTTP leg of an agent's network test (NETWORK_TEST_HTTP_PATH in libs/contracts). Only a
 * registered machine may call it, with its machine token: public to the API-token guard,
 * authenticated by MachineCallerGuard.
 */
@ApiTags('machine agent')
@ApiBearerAuth()
@Public()
@UseGuards(MachineCallerGuard)
@MachineTokenOnly()
@Controller('api/v1/machine/network-test')
export class NetworkTestController {
  constructor(private readonly networkTest: NetworkTestService) {}

  @Post()
  @HttpCode(200)
  @ApiOperation({ summary: `Sink: reads an application/octet-stream body (at most ${NETWORK_TEST_HTTP_MAX_BYTES} bytes) and discards it` })
  async sink(@Req() req: FastifyRequest, @Res({ passthrough: true }) reply: FastifyReply): Promise<NetworkTestSinkResponse> {
    try {
      return { receivedBytes: await this.networkTest.drain(req.body, req.headers['content-type'], req.headers['content-length']) };
    } catch (e) {
      // Answer once the client has sent everything (it reads no answer before), unless the rest is
      // more than a test upload: then close the connection after the answer.
      if (e instanceof PayloadTooLargeException) {
        const body = req.body instanceof Readable ? req.body : req.raw;
        const declared = Number(req.headers['content-length']);
        const worthReading = !(declared > REFUSED_UPLOAD_DISCARD.maxBytes);
        if (!worthReading || !(await discardBody(body, REFUSED_UPLOAD_DISCARD))) reply.header('connection', 'close');
      }
      throw e;
    }
  }

  @Get()
  @ApiOperation({ summary: `Source: answers with ?bytes=N bytes (at most ${NETWORK_TEST_HTTP_MAX_BYTES})` })
  source(@Query() query: NetworkTestSourceQuery): StreamableFile {
    return new StreamableFile(this.networkTest.source(query.bytes), { type: 'application/octet-stream', length: query.bytes });
  }
}
