import { type DynamicModule, Module } from '@nestjs/common';
import { STREAM_DECLARERS } from '#tern/contracts';
import { type TernConfig } from '#tern/config';
import { CoreModule } from '#tern/service';
import { ScalingModule } from './scaling/scaling.module.js';

@Module({})
export class AutoscalerModule {
  static forRoot(config: TernConfig): DynamicModule {
    return {
      module: AutoscalerModule,
      imports: [CoreModule.forRoot(config, { database: false, streams: [...STREAM_DECLARERS.autoscaler] }), ScalingModule],
    };
  }
}
