import { type DynamicModule, Module } from '@nestjs/common';
import { STREAM_DECLARERS } from '#tern/contracts';
import { APP_GUARD } from '@nestjs/core';
import { type TernConfig } from '#tern/config';
import { CoreModule } from '#tern/service';
import { ApiTokenGuard } from './auth/api-token.guard.js';
import { AuthModule } from './auth/auth.module.js';
import { CodeModule } from './code/code.module.js';
import { DeploymentsModule } from './deployments/deployments.module.js';
import { EndpointsModule } from './endpoints/endpoints.module.js';
import { SystemHealthModule } from './health/system-health.module.js';
import { MachineRegistrationModule } from './machine-registration/machine-registration.module.js';
import { MachinesModule } from './machines/machines.module.js';
import { RegistryTokensModule } from './registry-tokens/registry-tokens.module.js';
import { PoolsModule } from './pools/pools.module.js';
import { NatsUsersModule } from './nats-users/nats-users.module.js';
import { NetworkTestModule } from './network-test/network-test.module.js';
import { ObjectStoresDeclaration } from './object-stores.js';
import { FunctionsModule } from './functions/functions.module.js';
import { MapsModule } from './maps/maps.module.js';
import { SchedulesModule } from './schedules/schedules.module.js';
import { SecretsModule } from './secrets/secrets.module.js';
import { SandboxesModule } from './sandboxes/sandboxes.module.js';
import { TasksModule } from './tasks/tasks.module.js';
import { UsageModule } from './usage/usage.module.js';
import { VolumesModule } from './volumes/volumes.module.js';
import { WorkspacesModule } from './workspaces/workspaces.module.js';

@Module({})
export class GatewayModule {
  static forRoot(config: TernConfig): DynamicModule {
    return {
      module: GatewayModule,
      imports: [
        // EVENTS and HEARTBEATS too: registrations and keepalives publish there, scheduler or not.
        CoreModule.forRoot(config, { database: true, streams: [...STREAM_DECLARERS.gateway], readiness: false }),
        AuthModule,
        SystemHealthModule,
        WorkspacesModule,
        NatsUsersModule,
        NetworkTestModule,
        PoolsModule,
        MachinesModule,
        MachineRegistrationModule,
        CodeModule,
        RegistryTokensModule,
        SecretsModule,
        DeploymentsModule,
        EndpointsModule,
        TasksModule,
        FunctionsModule,
        MapsModule,
        SchedulesModule,
        UsageModule,
        SandboxesModule,
        VolumesModule,
      ],
      providers: [{ provide: APP_GUARD, useClass: ApiTokenGuard }, ObjectStoresDeclaration],
    };
  }
}
