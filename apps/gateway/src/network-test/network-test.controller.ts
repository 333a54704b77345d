import { Controller, Get, HttpCode, Post, Query, Req, StreamableFile, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import { NETWORK_TEST_HTTP_MAX_BYTES, type NetworkTestSinkResponse } from '#tern/contracts';
import { Public } from '#tern/observability';
import { MachineTokenOnly } from '../machine-registration/machine-caller.js';
import { MachineCallerGuard } from '../machine-registration/machine-caller.guard.js';
import { NetworkTestSourceQuery } from './dto/network-test-source.query.js';
import { NetworkTestService } from './network-test.service.js';

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
  async sink(@Req() req: FastifyRequest): Promise<NetworkTestSinkResponse> {
    // A refused upload's 413 waits for the rest of the body (installRequestIntake reads and drops it).
    return { receivedBytes: await this.networkTest.drain(req.body, req.headers['content-type'], req.headers['content-length']) };
  }

  @Get()
  @ApiOperation({ summary: `Source: answers with ?bytes=N bytes (at most ${NETWORK_TEST_HTTP_MAX_BYTES})` })
  source(@Query() query: NetworkTestSourceQuery): StreamableFile {
    return new StreamableFile(this.networkTest.source(query.bytes), { type: 'application/octet-stream', length: query.bytes });
  }
}
