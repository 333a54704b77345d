import { type DynamicModule, Module } from '@nestjs/common';
import { STREAM_DECLARERS } from '#tern/contracts';
import { type TernConfig } from '#tern/config';
import { CoreModule } from '#tern/service';
import { ContainersModule } from './containers/containers.module.js';
import { MachineRegistryModule } from './machines/machine-registry.module.js';
import { SchedulesModule } from './schedules/schedules.module.js';
import { VerificationModule } from './verification/verification.module.js';

@Module({})
export class SchedulerModule {
  static forRoot(config: TernConfig): DynamicModule {
    return {
      module: SchedulerModule,
      imports: [
        CoreModule.forRoot(config, { database: true, streams: [...STREAM_DECLARERS.scheduler] }),
        MachineRegistryModule,
        ContainersModule,
        SchedulesModule,
        VerificationModule,
      ],
    };
  }
}
