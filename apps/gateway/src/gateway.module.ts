import { type DynamicModule, Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { type TernConfig } from '#tern/config';
import { CoreModule } from '#tern/service';
import { ApiTokenGuard } from './auth/api-token.guard.js';
import { AuthModule } from './auth/auth.module.js';
import { SystemHealthModule } from './health/system-health.module.js';
import { WorkspacesModule } from './workspaces/workspaces.module.js';

@Module({})
export class GatewayModule {
  static forRoot(config: TernConfig): DynamicModule {
    return {
      module: GatewayModule,
      imports: [
        CoreModule.forRoot(config, { database: true, streams: ['TASKS'], readiness: false }),
        AuthModule,
        SystemHealthModule,
        WorkspacesModule,
      ],
      providers: [{ provide: APP_GUARD, useClass: ApiTokenGuard }],
    };
  }
}
