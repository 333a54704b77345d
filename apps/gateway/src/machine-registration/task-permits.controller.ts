import { ConflictException, Controller, Get, NotFoundException, Param, ParseIntPipe, ParseUUIDPipe, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '@nestjs/swagger';
import { AGENT_TASK_PERMITS_PATH, AgentTaskPermit } from '#tern/contracts';
import { Public } from '#tern/observability';
import { ContainersRepository, type Machine } from '#tern/persistence';
import { CurrentMachine, MachineTokenOnly } from './machine-caller.js';
import { MachineCallerGuard } from './machine-caller.guard.js';
import { MachineNatsUsers } from './machine-nats-users.js';

/**
 * Task permits: a machine's NATS user for pulling one task-queue version's tasks, given only while
 * a container of that version is placed on it (the scheduler's record). Anything else is 404,
 * the same as a version that does not exist, so a machine learns nothing about other queues.
 */
@ApiTags('machine agent')
@ApiBearerAuth()
@Public()
@UseGuards(MachineCallerGuard)
@MachineTokenOnly()
@Controller(AGENT_TASK_PERMITS_PATH)
export class TaskPermitsController {
  constructor(
    private readonly containers: ContainersRepository,
    private readonly natsUsers: MachineNatsUsers,
  ) {}

  @Get(':deploymentId/versions/:version')
  @ApiOperation({
    summary:
      "A short-lived NATS user JWT, for the calling machine's own NATS key, that may pull and ack only this task-queue version's consumer; 404 unless a container of it is placed on the machine",
  })
  async permit(
    @CurrentMachine() machine: Machine,
    @Param('deploymentId', new ParseUUIDPipe()) deploymentId: string,
    @Param('version', ParseIntPipe) version: number,
  ): Promise<AgentTaskPermit> {
    if (!this.natsUsers.enabled || !machine.natsPublicKey)
      throw new ConflictException(
        'this machine has no NATS user of its own (NATS is not in operator mode here, or it registered without a NATS key): it pulls tasks with its own connection',
      );
    if (!(await this.containers.versionPlacedOn(machine.id, deploymentId, version)))
      throw new NotFoundException(`no container of ${deploymentId} version ${version} is placed on this machine`);
    const { jwt, expiresAt } = await this.natsUsers.issueTaskPermit(machine.id, machine.natsPublicKey, deploymentId, version);
    return { jwt, expiresAt: expiresAt.toISOString() };
  }
}
