import { Controller, Inject } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import {
  CONTAINER_FAILED,
  CONTAINER_STARTED,
  CONTAINER_STOPPED,
  ContainerFailed,
  ContainerStarted,
  ContainerStopped,
} from '#tern/contracts';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { endOfUsage } from '#tern/metering';
import { OnMessage } from '#tern/messaging';
import { meteringEventsTotal } from '../metering-metrics.js';
import { CONSUMER } from './consumer-options.js';
import { ContainerUsageLedger } from './container-usage-ledger.js';

/**
 * Container lifecycle events, one durable consumer each, replayed from the start of EVENTS when
 * first created and resumed where they left off after a restart. Usage starts at `started`;
 * it ends at `stopped`, at a crash (`failed` in phase runtime, whose stop report follows a
 * little later), or when the scheduler declares the container lost with its machine
 * (`failed` in phase machine-lost: ended at the machine's last heartbeat). Other failures
 * happen before `started` or are followed by a stop, and do not end usage themselves.
 */
@Controller()
export class ContainerUsageEventsController {
  constructor(
    private readonly ledger: ContainerUsageLedger,
    @Inject(TERN_CONFIG) private readonly config: TernConfig,
  ) {}

  @OnMessage(CONTAINER_STARTED, CONSUMER)
  async started(@Payload() event: ContainerStarted) {
    await this.ledger.started(event, event.resources);
    meteringEventsTotal.inc({ kind: 'container.started' });
  }

  @OnMessage(CONTAINER_STOPPED, CONSUMER)
  async stopped(@Payload() event: ContainerStopped) {
    await this.ledger.ended(event, new Date(endOfUsage({ kind: 'stopped', at: Date.parse(event.at) })), 'stopped');
    meteringEventsTotal.inc({ kind: 'container.stopped' });
  }

  @OnMessage(CONTAINER_FAILED, CONSUMER)
  async failed(@Payload() event: ContainerFailed) {
    const at = Date.parse(event.at);
    if (event.phase === 'runtime') {
      await this.ledger.ended(event, new Date(endOfUsage({ kind: 'crashed', at })), 'crashed');
    } else if (event.phase === 'machine-lost') {
      const heartbeatTtlSeconds = this.config.machines.heartbeatTtlSeconds;
      await this.ledger.ended(event, new Date(endOfUsage({ kind: 'machine-lost', at, heartbeatTtlSeconds })), 'machine-lost');
    }
    meteringEventsTotal.inc({ kind: `container.failed.${event.phase}` });
  }
}
