import { type DynamicModule, Module } from '@nestjs/common';
import { STREAM_DECLARERS } from '#tern/contracts';
import { type TernConfig } from '#tern/config';
import { CoreModule } from '#tern/service';
import { ReputationEventsController } from './events/reputation-events.controller.js';
import { MachineBook } from './scores/machine-book.js';
import { REPUTATION_PARAMS, reputationParams } from './scores/reputation-params.js';
import { Scorer } from './scores/scorer.js';

@Module({})
export class ReputationModule {
  static forRoot(config: TernConfig): DynamicModule {
    return {
      module: ReputationModule,
      imports: [CoreModule.forRoot(config, { database: true, streams: [...STREAM_DECLARERS.reputation] })],
      controllers: [ReputationEventsController],
      providers: [MachineBook, Scorer, { provide: REPUTATION_PARAMS, useValue: reputationParams(config) }],
    };
  }
}
