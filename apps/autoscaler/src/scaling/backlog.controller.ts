import { Controller } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { SCALE_BACKLOG, ScaleBacklog } from '#tern/contracts';
import { OnMessage } from '#tern/messaging';
import { DeploymentCatalog } from './deployment-catalog.js';
import { LoadBoard } from './load-board.js';
import { ScalingLoop } from './scaling-loop.js';

/**
 * Requests wait with no container: decide for the deployment now, not at the next tick.
 * Only new backlogs matter (deliver 'new'); an old one is answered by the load reports since.
 * ScaleBacklog names no version, so it counts for the version `/endpoint/<name>` serves.
 */
@Controller()
export class BacklogController {
  constructor(
    private readonly catalog: DeploymentCatalog,
    private readonly board: LoadBoard,
    private readonly loop: ScalingLoop,
  ) {}

  @OnMessage(SCALE_BACKLOG, { deliver: 'new', ackWaitMs: 5000 })
  async backlog(@Payload() event: ScaleBacklog) {
    const version = this.catalog.latest(event.deploymentId);
    if (!version) return;
    this.board.recordBacklog(version.key, event.heldRequests, Date.now());
    await this.loop.step(version);
  }
}
