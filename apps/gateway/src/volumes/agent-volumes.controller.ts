import {
  BadRequestException,
  Body,
  Controller,
  ForbiddenException,
  Get,
  Header,
  NotFoundException,
  Param,
  Post,
  Put,
  Req,
  StreamableFile,
  UnsupportedMediaTypeException,
  UseGuards,
} from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import { Readable } from 'node:stream';
import {
  AGENT_CONTAINERS_PATH,
  VOLUME_CHUNK_BYTES,
  type VolumeBlobGrant,
  type VolumeCommitResult,
  type VolumeManifest,
} from '#tern/contracts';
import { Public } from '#tern/observability';
import { type Machine, type PlacedVolume, VolumesRepository } from '#tern/persistence';
import { sha256Hex } from '#tern/volumes';
import { CurrentMachine, MachineTokenOnly } from '../machine-registration/machine-caller.js';
import { MachineCallerGuard } from '../machine-registration/machine-caller.guard.js';
import { readBounded } from '../read-bounded.js';
import { AgentChunkParams, AgentVolumeParams, VolumeCommitDto } from './dto/volume.dto.js';
import { VolumeChunkStore } from './volume-chunk-store.js';
import { VolumesService } from './volumes.service.js';

/**
 * The volumes of containers placed on the calling machine: their manifests and chunks to mount
 * them, and chunk uploads and commits for read-write mounts. A container not placed on the
 * machine (or stopped), a volume its spec does not mount and a chunk the volume does not hold
 * are all the same 404, so a machine learns nothing about what is not its own.
 */
@ApiTags('machine agent')
@ApiBearerAuth()
@Public()
@UseGuards(MachineCallerGuard)
@MachineTokenOnly()
@Controller(AGENT_CONTAINERS_PATH)
export class AgentVolumesController {
  constructor(
    private readonly volumes: VolumesService,
    private readonly repository: VolumesRepository,
    private readonly chunks: VolumeChunkStore,
  ) {}

  @Get(':containerId/volumes/:name/manifest')
  @ApiOperation({ summary: 'The committed state of a volume mounted by a container placed on the calling machine' })
  async manifest(@CurrentMachine() machine: Machine, @Param() params: AgentVolumeParams): Promise<VolumeManifest> {
    const placed = await this.placed(machine, params);
    return this.volumes.manifest(placed.workspaceId, placed.volumeId, params.name);
  }

  @Get(':containerId/volumes/:name/grant')
  @ApiOperation({
    summary:
      "A short-lived registry token for the repository of a volume mounted by a container placed on the calling machine: pull, and push when the mount is read-write (404 where chunks live in the gateway's object store)",
  })
  async grant(@CurrentMachine() machine: Machine, @Param() params: AgentVolumeParams): Promise<VolumeBlobGrant> {
    const placed = await this.placed(machine, params);
    return this.chunks.grant(machine.id, placed.workspaceId, placed.volumeId, !placed.readOnly);
  }

  @Get(':containerId/volumes/:name/chunks/:hex')
  @Header('content-type', 'application/octet-stream')
  @ApiOperation({ summary: 'A chunk of a volume mounted by a container placed on the calling machine' })
  async chunk(@CurrentMachine() machine: Machine, @Param() params: AgentChunkParams): Promise<StreamableFile> {
    const placed = await this.placed(machine, params);
    const notFound = new NotFoundException(`volume ${params.name} of container ${params.containerId} holds no chunk ${params.hex}`);
    if (!(await this.repository.holdsChunk(placed.volumeId, params.hex))) throw notFound;
    const data = await this.chunks.get(placed.workspaceId, placed.volumeId, params.hex);
    if (!data) throw notFound;
    return new StreamableFile(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
  }

  @Put(':containerId/volumes/:name/chunks/:hex')
  @ApiOperation({
    summary: `Upload a chunk (at most ${VOLUME_CHUNK_BYTES} bytes, application/octet-stream) for a commit of a read-write mount`,
  })
  async putChunk(
    @CurrentMachine() machine: Machine,
    @Param() params: AgentChunkParams,
    @Req() req: FastifyRequest,
  ): Promise<{ hex: string; stored: boolean }> {
    const placed = await this.writable(machine, params);
    if (!(req.body instanceof Readable)) throw new UnsupportedMediaTypeException('send the chunk as application/octet-stream');
    const chunk = await readBounded(
      req.body,
      VOLUME_CHUNK_BYTES,
      (detail) => new BadRequestException(`a chunk is at most ${VOLUME_CHUNK_BYTES} bytes (${detail})`),
    );
    if (sha256Hex(chunk) !== params.hex) throw new BadRequestException(`the chunk's sha256 is ${sha256Hex(chunk)}, not ${params.hex}`);
    const stored = await this.volumes.storeChunk(placed.workspaceId, placed.volumeId, chunk, () =>
      this.volumes.roomFor(placed.workspaceId, chunk.length, 0),
    );
    return { hex: stored.hex, stored: stored.added > 0 };
  }

  @Post(':containerId/volumes/:name/commit')
  @ApiOperation({
    summary:
      'Commit the changes of a read-write mount since its base version: last commit wins per file; the answer names the files others changed since',
  })
  async commit(
    @CurrentMachine() machine: Machine,
    @Param() params: AgentVolumeParams,
    @Body() body: VolumeCommitDto,
  ): Promise<VolumeCommitResult> {
    const placed = await this.writable(machine, params);
    return this.volumes.commit(placed.volumeId, placed.workspaceId, body.baseVersion, body.writes, body.removals);
  }

  private async placed(machine: Machine, params: AgentVolumeParams): Promise<PlacedVolume> {
    const placed = await this.repository.placedVolume(machine.id, params.containerId, params.name);
    if (!placed)
      throw new NotFoundException(`volume ${params.name} is not mounted by a container ${params.containerId} placed on this machine`);
    return placed;
  }

  private async writable(machine: Machine, params: AgentVolumeParams): Promise<PlacedVolume> {
    const placed = await this.placed(machine, params);
    if (placed.readOnly) throw new ForbiddenException(`container ${params.containerId} mounts volume ${params.name} read-only`);
    return placed;
  }
}
