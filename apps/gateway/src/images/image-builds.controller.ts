import { Readable } from 'node:stream';
import { Body, Controller, Post, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { CurrentPrincipal, type Principal } from '../auth/principal.js';
import { ImageBuildRequest } from './dto/image-build.request.js';
import { ImageBuildsService } from './image-builds.service.js';

@ApiTags('images')
@ApiBearerAuth()
@Controller('api/v1/images')
export class ImageBuildsController {
  constructor(private readonly builds: ImageBuildsService) {}

  @Post('builds')
  @ApiOperation({
    summary: "Build a spec's image: on a builder machine, a layer per step",
    description:
      'Body: `image` (a build: base, apt, pip, npm, commands, env, workdir), `name` (the image goes to builds/<workspace id>/<name>), `code` (the uploaded folder, for pip_wheels). Answers 200 with NDJSON as the build runs: `{"type":"step",index,total,name,summary,cached}` per step, `{"type":"log",line}` for its output, then `{"type":"built",ref,digest,…}` or `{"type":"failed",step,message}` (the step and the tail of its log). An unchanged spec answers `built` with `reused: true` at once; a spec already building is followed, not built twice. 503 when no machine offers building.',
  })
  async build(@CurrentPrincipal() p: Principal, @Body() request: ImageBuildRequest, @Res() reply: FastifyReply): Promise<void> {
    const events = await this.builds.start(p, request);
    void reply.code(200).header('content-type', 'application/x-ndjson').send(Readable.from(events));
  }
}
