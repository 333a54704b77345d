import { Body, Controller, Delete, Get, HttpCode, Param, Post, Put, Query, Req, StreamableFile } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import { VOLUME_CHUNK_BYTES } from '#tern/contracts';
import { CurrentPrincipal, type Principal } from '../auth/principal.js';
import { CreateVolumeDto, VolumePathQuery, VolumePutQuery } from './dto/volume.dto.js';
import { VolumesService } from './volumes.service.js';

@ApiTags('volumes')
@ApiBearerAuth()
@Controller('api/v1/volumes')
export class VolumesController {
  constructor(private readonly volumes: VolumesService) {}

  @Post()
  @ApiOperation({ summary: 'Create an empty volume in this workspace (409 when the name is taken)' })
  create(@CurrentPrincipal() p: Principal, @Body() body: CreateVolumeDto) {
    return this.volumes.create(p.workspaceId, body.name);
  }

  @Get()
  @ApiOperation({ summary: "This workspace's volumes with their files and bytes, and its use of the volume quota" })
  list(@CurrentPrincipal() p: Principal) {
    return this.volumes.list(p.workspaceId);
  }

  @Get(':name')
  @ApiOperation({ summary: 'One volume: version, files, bytes' })
  get(@CurrentPrincipal() p: Principal, @Param('name') name: string) {
    return this.volumes.get(p.workspaceId, name);
  }

  @Delete(':name')
  @HttpCode(204)
  @ApiOperation({ summary: 'Delete a volume and everything in it' })
  async delete(@CurrentPrincipal() p: Principal, @Param('name') name: string): Promise<void> {
    await this.volumes.delete(p.workspaceId, name);
  }

  @Post(':name/commit')
  @HttpCode(200)
  @ApiOperation({
    summary:
      "Commit now what the workspace's running containers and sandboxes wrote to their read-write copies of the volume; per container (a sandbox's id as containerId): its report (files it overwrote that others changed since its base, entries it skipped)",
  })
  commit(@CurrentPrincipal() p: Principal, @Param('name') name: string) {
    return this.volumes.commitMounts(p.workspaceId, name);
  }

  @Get(':name/ls')
  @ApiOperation({ summary: 'The files and directories right below ?path= (the root by default)' })
  ls(@CurrentPrincipal() p: Principal, @Param('name') name: string, @Query() query: VolumePathQuery) {
    return this.volumes.ls(p.workspaceId, name, query.path);
  }

  @Put(':name/files')
  @ApiOperation({
    summary: `Write a file at ?path= from the body (application/octet-stream, streamed in ${VOLUME_CHUNK_BYTES / 2 ** 20} MiB chunks; any size within the quota; ?mode=644)`,
  })
  put(@CurrentPrincipal() p: Principal, @Param('name') name: string, @Query() query: VolumePutQuery, @Req() req: FastifyRequest) {
    return this.volumes.put(p.workspaceId, name, query.path ?? '', req.body, {
      contentType: req.headers['content-type'],
      contentLength: req.headers['content-length'],
      mode: query.mode,
    });
  }

  @Get(':name/files')
  @ApiOperation({ summary: 'Read the file at ?path= (streamed)' })
  async download(@CurrentPrincipal() p: Principal, @Param('name') name: string, @Query() query: VolumePathQuery): Promise<StreamableFile> {
    const file = await this.volumes.download(p.workspaceId, name, query.path ?? '');
    return new StreamableFile(file.stream, { type: 'application/octet-stream', length: file.size });
  }

  @Delete(':name/files')
  @ApiOperation({ summary: 'Remove the file or directory at ?path= (a directory with everything below it)' })
  rm(@CurrentPrincipal() p: Principal, @Param('name') name: string, @Query() query: VolumePathQuery) {
    return this.volumes.rm(p.workspaceId, name, query.path ?? '');
  }
}
