import { type DynamicModule, Module } from '@nestjs/common';
import { type TernConfig } from '#tern/config';
import { CoreModule } from '#tern/service';
import { AGENT_CONTEXT, type AgentContext } from './agent-context.js';
import { ImageBuilds } from './builds/image-builds.js';
import { ContainerCommandsController } from './containers/container-commands.controller.js';
import { containerRuntimeProvider } from './containers/container-runtime.provider.js';
import { ContainersService } from './containers/containers.service.js';
import { GpuHolders } from './containers/gpu-holders.js';
import { ContainerTunnelsController } from './invoke/container-tunnels.controller.js';
import { InvokeRoutes } from './invoke/invoke-routes.js';
import { HeartbeatService } from './heartbeat/heartbeat.service.js';
import { JoinService } from './join.service.js';
import { NatsLink } from './nats-link.js';
import { NetworkProbe } from './network-test/network-probe.js';
import { ProofCommandsController } from './proof/proof-commands.controller.js';
import { ProofsService, provers } from './proof/proofs.service.js';
import { RegistrationWatch } from './registration/registration-watch.js';
import { SandboxCommandsController } from './sandboxes/sandbox-commands.controller.js';
import { ServerLoads } from './server-loads/server-loads.js';
import { SandboxesService } from './sandboxes/sandboxes.service.js';
import { SpotChecker } from './tasks/spot-checker.js';
import { TaskDispatcher } from './tasks/task-dispatcher.js';
import { VolumeCommandsController } from './volumes/volume-commands.controller.js';
import { volumeMountsProvider } from './volumes/volume-mounts.provider.js';

/** One NATS session of the node agent: NATS only, never Postgres. Built from a registration answer. */
@Module({})
export class AgentModule {
  static forRoot(config: TernConfig, ctx: AgentContext): DynamicModule {
    return {
      module: AgentModule,
      imports: [
        CoreModule.forRoot(config, {
          database: false,
          // The control plane declares every stream and consumer; an agent only publishes and pulls.
          streams: [],
          presence: { machineId: ctx.registration.machineId, pool: ctx.registration.pool },
        }),
      ],
      controllers: [
        ContainerCommandsController,
        ContainerTunnelsController,
        SandboxCommandsController,
        VolumeCommandsController,
        ProofCommandsController,
      ],
      providers: [
        { provide: AGENT_CONTEXT, useValue: ctx },
        NatsLink,
        containerRuntimeProvider,
        InvokeRoutes,
        ImageBuilds,
        TaskDispatcher,
        SpotChecker,
        volumeMountsProvider,
        GpuHolders,
        SandboxesService,
        ServerLoads,
        ContainersService,
        NetworkProbe,
        HeartbeatService,
        RegistrationWatch,
        JoinService,
        provers,
        ProofsService,
      ],
    };
  }
}
