import { Controller } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import {
  AGENT_CONTAINER_START,
  AGENT_CONTAINER_STOP,
  ContainerStart,
  type ContainerStartReply,
  ContainerStop,
  type ContainerStopReply,
} from '#tern/contracts';
import { OnRequest } from '#tern/messaging';
import { ContainersService } from './containers.service.js';

/** Container commands for this machine only: `<ns>.agent.<own machine id>.container.{start,stop}.v1`. */
@Controller()
export class ContainerCommandsController {
  constructor(private readonly containers: ContainersService) {}

  @OnRequest(AGENT_CONTAINER_START, { tokens: ['machineId'] })
  start(@Payload() cmd: ContainerStart): ContainerStartReply {
    return this.containers.start(cmd);
  }

  @OnRequest(AGENT_CONTAINER_STOP, { tokens: ['machineId'] })
  stop(@Payload() cmd: ContainerStop): ContainerStopReply {
    return this.containers.stop(cmd);
  }
}
