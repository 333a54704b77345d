import { Controller } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { SANDBOX_ENDED, SANDBOX_STARTED, SANDBOX_USAGE_DEPLOYMENT, SandboxEnded, SandboxLifecycle } from '#tern/contracts';
import { OnMessage } from '#tern/messaging';
import { meteringEventsTotal } from '../metering-metrics.js';
import { CONSUMER } from './consumer-options.js';
import { ContainerUsageLedger, type MeteredFacts } from './container-usage-ledger.js';

/**
 * Sandboxes are metered as containers are, through the same ledger (hourly slices, checkpoints
 * while they run), under the deployment id `sandbox`. Their facts come from the gateway, which
 * placed them and saw them start and end: only the gateway may publish them (permissions table).
 */
@Controller()
export class SandboxUsageEventsController {
  constructor(private readonly ledger: ContainerUsageLedger) {}

  @OnMessage(SANDBOX_STARTED, CONSUMER)
  async started(@Payload() event: SandboxLifecycle) {
    await this.ledger.started(facts(event), new Date(event.at));
    meteringEventsTotal.inc({ kind: 'sandbox.started' });
  }

  @OnMessage(SANDBOX_ENDED, CONSUMER)
  async ended(@Payload() event: SandboxEnded) {
    if (event.state === 'failed') return; // it never ran: nothing to meter
    await this.ledger.ended(facts(event), new Date(event.at), event.state === 'lost' ? 'machine-lost' : 'stopped');
    meteringEventsTotal.inc({ kind: 'sandbox.ended' });
  }
}

function facts(event: SandboxLifecycle): MeteredFacts {
  return {
    identity: {
      containerId: event.sandboxId,
      workspaceId: event.workspaceId,
      deploymentId: SANDBOX_USAGE_DEPLOYMENT,
      deploymentVersion: 1,
      machineId: event.machineId,
    },
    resources: event.resources,
  };
}
