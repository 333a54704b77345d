import { Controller, Head, NotFoundException, Param, Put, Req, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { CODE_BUNDLE_MAX_BYTES } from '#tern/contracts';
import { CurrentPrincipal, type Principal } from '../auth/principal.js';
import { CodeService, type CodeUploadResult } from './code.service.js';
import { CodeDigestParams } from './dto/code-digest.params.js';

@ApiTags('code')
@ApiBearerAuth()
@Controller('api/v1/code')
export class CodeController {
  constructor(private readonly code: CodeService) {}

  @Head(':digest')
  @ApiOperation({ summary: 'Whether this workspace has a code bundle: 200 or 404 (the CLI skips uploads the workspace has)' })
  async head(@CurrentPrincipal() p: Principal, @Param() params: CodeDigestParams): Promise<void> {
    if (!(await this.code.exists(p.workspaceId, params.digest))) throw new NotFoundException(`code ${params.digest} not found`);
  }

  @Put(':digest')
  @ApiOperation({
    summary: `Upload a code bundle (tar.gz, application/gzip or application/octet-stream, at most ${CODE_BUNDLE_MAX_BYTES / 2 ** 20} MiB) under its sha256, for this workspace; 201 when new to it, 200 when it had it`,
  })
  async put(
    @CurrentPrincipal() p: Principal,
    @Param() params: CodeDigestParams,
    @Req() req: FastifyRequest,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<CodeUploadResult> {
    // A refused upload's 413 waits for the rest of the body (installRequestIntake reads and drops it).
    const result = await this.code.upload(
      p.workspaceId,
      params.digest,
      req.body,
      req.headers['content-type'],
      req.headers['content-length'],
    );
    reply.status(result.created ? 201 : 200);
    return result;
  }
}
