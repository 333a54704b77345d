import { Controller, Logger } from '@nestjs/common';
import { Ctx, Payload } from '@nestjs/microservices';
import {
  CONTAINER_FAILED,
  CONTAINER_READY,
  CONTAINER_SCHEDULED,
  CONTAINER_STARTED,
  CONTAINER_STARTING,
  CONTAINER_STOPPED,
  ContainerFailed,
  ContainerReady,
  ContainerScheduled,
  ContainerStarted,
  ContainerStarting,
  ContainerStopped,
} from '#tern/contracts';
import { JetStreamContext, OnMessage } from '#tern/messaging';
import { Reconciler } from '../placement/reconciler.js';
import { RoutePublisher } from '../placement/route-publisher.js';
import { ContainerLifecycleService } from './container-lifecycle.service.js';
import { type LifecycleEvent } from './container-progress.js';

/**
 * Container lifecycle events from agents (and the scheduler's own `scheduled`), one durable
 * consumer each, replayed from the start of EVENTS when first created: the table is rebuilt
 * from the stream if the scheduler was never there to see them.
 */
@Controller()
export class ContainersController {
  private readonly logger = new Logger('containers');

  constructor(
    private readonly lifecycle: ContainerLifecycleService,
    private readonly routes: RoutePublisher,
    private readonly reconciler: Reconciler,
  ) {}

  @OnMessage(CONTAINER_SCHEDULED)
  scheduled(@Payload() event: ContainerScheduled, @Ctx() ctx: JetStreamContext) {
    return this.record({ kind: 'scheduled', event }, ctx);
  }

  @OnMessage(CONTAINER_STARTING)
  starting(@Payload() event: ContainerStarting, @Ctx() ctx: JetStreamContext) {
    return this.record({ kind: 'starting', event }, ctx);
  }

  @OnMessage(CONTAINER_STARTED)
  started(@Payload() event: ContainerStarted, @Ctx() ctx: JetStreamContext) {
    return this.record({ kind: 'started', event }, ctx);
  }

  @OnMessage(CONTAINER_READY)
  ready(@Payload() event: ContainerReady, @Ctx() ctx: JetStreamContext) {
    return this.record({ kind: 'ready', event }, ctx);
  }

  @OnMessage(CONTAINER_STOPPED)
  stopped(@Payload() event: ContainerStopped, @Ctx() ctx: JetStreamContext) {
    return this.record({ kind: 'stopped', event }, ctx);
  }

  @OnMessage(CONTAINER_FAILED)
  failed(@Payload() event: ContainerFailed, @Ctx() ctx: JetStreamContext) {
    return this.record({ kind: 'failed', event }, ctx);
  }

  private async record(e: LifecycleEvent, ctx: JetStreamContext) {
    const outcome = await this.lifecycle.record(e);
    if (outcome === 'unknown-deployment-version') {
      // The gateway writes a version before anything runs it, so waiting will not help.
      ctx.delivery?.reject(
        `container ${e.event.containerId}: ${e.kind} event for unknown deployment ${e.event.deploymentId} version ${e.event.deploymentVersion}`,
      );
      return;
    }
    this.logger.debug({ containerId: e.event.containerId, kind: e.kind, outcome }, `container ${e.event.containerId}: ${e.kind}`);
    // The route follows the row: a ready event puts it if the row is still running, an end removes it.
    if (e.kind === 'ready') await this.routes.refresh(e.event.containerId);
    else if (e.kind === 'stopped' || e.kind === 'failed') {
      await this.routes.remove([e.event.containerId]);
      // Its resources are free again: a version waiting for room need not sit out its back-off.
      this.reconciler.roomFreed();
    }
  }
}
