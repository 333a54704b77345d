import { type DynamicModule, Module } from '@nestjs/common';
import { type TernConfig } from '#tern/config';
import { CoreModule } from '#tern/service';
import { defaultMachineId } from './machine-id.js';

/** The node agent: NATS only, never Postgres. */
@Module({})
export class AgentModule {
  static forRoot(config: TernConfig): DynamicModule {
    const machineId = config.machineId ?? defaultMachineId();
    return {
      module: AgentModule,
      imports: [
        CoreModule.forRoot(config, {
          database: false,
          streams: ['EVENTS', 'HEARTBEATS'],
          presence: { machineId, pool: config.pool },
        }),
      ],
    };
  }
}
