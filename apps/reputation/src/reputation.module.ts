import { type DynamicModule, Module } from '@nestjs/common';
import { type TernConfig } from '#tern/config';
import { CoreModule } from '#tern/service';

@Module({})
export class ReputationModule {
  static forRoot(config: TernConfig): DynamicModule {
    return {
      module: ReputationModule,
      imports: [CoreModule.forRoot(config, { database: true, streams: ['EVENTS'] })],
    };
  }
}
