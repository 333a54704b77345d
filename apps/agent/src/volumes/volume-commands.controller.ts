import { Controller } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { AGENT_VOLUME_COMMIT, VolumeCommitAsk, type VolumeCommitAnswer } from '#tern/contracts';
import { OnRequest } from '#tern/messaging';
import { ContainersService } from '../containers/containers.service.js';

/** Volume commands for this machine only: `<ns>.agent.<own machine id>.volume.commit.v1`. */
@Controller()
export class VolumeCommandsController {
  constructor(private readonly containers: ContainersService) {}

  /** A commit asked through the API: the container's read-write copy of the volume, committed now. */
  @OnRequest(AGENT_VOLUME_COMMIT, { tokens: ['machineId'] })
  commit(@Payload() ask: VolumeCommitAsk): Promise<VolumeCommitAnswer> {
    return this.containers.volumes.commitAsked(ask.containerId, ask.volume);
  }
}
