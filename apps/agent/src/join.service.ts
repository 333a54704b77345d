import { Inject, Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { AGENT_CONTEXT, type AgentContext } from './agent-context.js';
import { ContainersService } from './containers/containers.service.js';
import { HeartbeatService } from './heartbeat/heartbeat.service.js';
import { NetworkProbe } from './network-test/network-probe.js';
import { RegistrationWatch } from './registration/registration-watch.js';

/**
 * The order in which a registered agent joins, in one place: settle what is already running
 * on the machine, test the network, then heartbeat. Container commands are served only after
 * this (the transport starts once the app has bootstrapped), so no work arrives before the
 * network test is in.
 */
@Injectable()
export class JoinService implements OnApplicationBootstrap {
  private readonly logger = new Logger('agent');

  constructor(
    private readonly containers: ContainersService,
    private readonly networkProbe: NetworkProbe,
    private readonly heartbeats: HeartbeatService,
    private readonly watch: RegistrationWatch,
    @Inject(AGENT_CONTEXT) private readonly ctx: AgentContext,
  ) {}

  async onApplicationBootstrap() {
    const { state } = this.ctx;
    state.setPhase('testing-network');
    await this.containers.reconcile();
    await this.networkProbe.run();
    this.heartbeats.start();
    this.watch.start();
    state.setPhase('running');
    this.logger.log(`machine ${this.ctx.registration.machineId} joined pool ${this.ctx.registration.pool}`);
  }
}
