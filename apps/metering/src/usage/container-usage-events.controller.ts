import { Controller, Inject } from '@nestjs/common';
import { Ctx, Payload } from '@nestjs/microservices';
import {
  CONTAINER_FAILED,
  CONTAINER_STARTED,
  CONTAINER_STOPPED,
  ContainerEvent,
  ContainerFailed,
  ContainerStarted,
  ContainerStopped,
} from '#tern/contracts';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { endOfUsage, observedEnd, observedStart } from '#tern/metering';
import { JetStreamContext, OnMessage } from '#tern/messaging';
import { type ContainerPlacement, ContainersRepository } from '#tern/persistence';
import { meteringEventsRefusedTotal, meteringEventsTotal } from '../metering-metrics.js';
import { CONSUMER } from './consumer-options.js';
import { ContainerUsageLedger, type MeteredFacts } from './container-usage-ledger.js';

/**
 * Container lifecycle events, one durable consumer each, replayed from the start of EVENTS when
 * first created and resumed where they left off after a restart. Usage starts at `started`;
 * it ends at `stopped`, at a crash (`failed` in phase runtime, whose stop report follows a
 * little later), or when the scheduler declares the container lost with its machine
 * (`failed` in phase machine-lost: ended at the machine's last heartbeat). Other failures
 * happen before `started` or are followed by a stop, and do not end usage themselves.
 *
 * An event only says which container and when: the workspace, deployment, machine and
 * resources charged come from the scheduler's placement of that container, and an event from
 * another machine than the one it was placed on is terminated and counted. Its times are
 * bounded by what NATS saw (see observedStart).
 */
@Controller()
export class ContainerUsageEventsController {
  constructor(
    private readonly ledger: ContainerUsageLedger,
    private readonly containers: ContainersRepository,
    @Inject(TERN_CONFIG) private readonly config: TernConfig,
  ) {}

  @OnMessage(CONTAINER_STARTED, CONSUMER)
  async started(@Payload() event: ContainerStarted, @Ctx() ctx: JetStreamContext) {
    const placed = await this.placement(event, ctx);
    if (!placed) return;
    await this.ledger.started(facts(placed), new Date(observedStart(Date.parse(event.at), bounds(placed, ctx))));
    meteringEventsTotal.inc({ kind: 'container.started' });
  }

  @OnMessage(CONTAINER_STOPPED, CONSUMER)
  async stopped(@Payload() event: ContainerStopped, @Ctx() ctx: JetStreamContext) {
    const placed = await this.placement(event, ctx);
    if (!placed) return;
    const end = endOfUsage({ kind: 'stopped', at: Date.parse(event.at) });
    await this.ledger.ended(facts(placed), new Date(observedEnd(end, bounds(placed, ctx))), 'stopped');
    meteringEventsTotal.inc({ kind: 'container.stopped' });
  }

  @OnMessage(CONTAINER_FAILED, CONSUMER)
  async failed(@Payload() event: ContainerFailed, @Ctx() ctx: JetStreamContext) {
    const at = Date.parse(event.at);
    if (event.phase === 'runtime' || event.phase === 'machine-lost') {
      const placed = await this.placement(event, ctx);
      if (!placed) return;
      const end =
        event.phase === 'runtime'
          ? endOfUsage({ kind: 'crashed', at })
          : endOfUsage({ kind: 'machine-lost', at, heartbeatTtlSeconds: this.config.machines.heartbeatTtlSeconds });
      await this.ledger.ended(
        facts(placed),
        new Date(observedEnd(end, bounds(placed, ctx))),
        event.phase === 'runtime' ? 'crashed' : 'machine-lost',
      );
    }
    meteringEventsTotal.inc({ kind: `container.failed.${event.phase}` });
  }

  /** The scheduler's placement of the event's container on the event's machine; undefined (the message terminated and counted) when there is none. */
  private async placement(event: ContainerEvent, ctx: JetStreamContext): Promise<ContainerPlacement | undefined> {
    const placed = await this.containers.placementOf(event.containerId);
    const why = !placed ? 'not-placed' : placed.machineId !== event.machineId ? 'other-machine' : undefined;
    if (!why) return placed;
    meteringEventsRefusedTotal.inc({ reason: why });
    ctx.delivery!.reject(
      why === 'not-placed'
        ? `container ${event.containerId} was never placed by the scheduler: not metered`
        : `container ${event.containerId} was placed on ${placed!.machineId ?? 'no machine'}, not on ${event.machineId} which reports it: not metered`,
    );
    return undefined;
  }
}

function facts(placed: ContainerPlacement): MeteredFacts {
  return {
    identity: {
      containerId: placed.id,
      workspaceId: placed.workspaceId,
      deploymentId: placed.deploymentId,
      deploymentVersion: placed.version,
      machineId: placed.machineId!,
    },
    resources: placed.requested,
  };
}

function bounds(placed: ContainerPlacement, ctx: JetStreamContext) {
  return { placedAt: placed.placedAt.getTime(), storedAt: ctx.delivery!.storedAt.getTime() };
}
