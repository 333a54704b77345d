import { Controller, Get, Header, NotFoundException, Param, StreamableFile, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import { AGENT_CODE_PATH } from '#tern/contracts';
import { Public } from '#tern/observability';
import { ContainersRepository, type Machine } from '#tern/persistence';
import { CurrentMachine, MachineTokenOnly } from '../machine-registration/machine-caller.js';
import { MachineCallerGuard } from '../machine-registration/machine-caller.guard.js';
import { CodeStore } from './code-store.js';
import { hexOf } from './code.service.js';
import { CodeDigestParams } from './dto/code-digest.params.js';

/**
 * Code bundles for the machines that run them: a machine gets a bundle only while a container
 * whose version names it is placed on it (and not stopped). Anything else is 404, the same as a
 * digest nobody uploaded, so a machine learns nothing about other tenants' code.
 */
@ApiTags('machine agent')
@ApiBearerAuth()
@Public()
@UseGuards(MachineCallerGuard)
@MachineTokenOnly()
@Controller(AGENT_CODE_PATH)
export class AgentCodeController {
  constructor(
    private readonly store: CodeStore,
    private readonly containers: ContainersRepository,
  ) {}

  @Get(':digest')
  @Header('content-type', 'application/gzip')
  @ApiOperation({ summary: 'The code bundle (tar.gz) of a container placed on the calling machine; 404 otherwise' })
  async get(@CurrentMachine() machine: Machine, @Param() params: CodeDigestParams): Promise<StreamableFile> {
    const notFound = new NotFoundException(`code ${params.digest} is not used by a container placed on this machine`);
    if (!(await this.containers.codePlacedOn(machine.id, params.digest))) throw notFound;
    const data = await this.store.get(hexOf(params.digest));
    if (!data) throw notFound;
    return new StreamableFile(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
  }
}
