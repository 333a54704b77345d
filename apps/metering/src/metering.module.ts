import { type DynamicModule, Module } from '@nestjs/common';
import { STREAM_DECLARERS } from '#tern/contracts';
import { type TernConfig } from '#tern/config';
import { CoreModule } from '#tern/service';
import { UsageLedgerModule } from './usage/usage-ledger.module.js';

@Module({})
export class MeteringModule {
  static forRoot(config: TernConfig): DynamicModule {
    return {
      module: MeteringModule,
      imports: [CoreModule.forRoot(config, { database: true, streams: [...STREAM_DECLARERS.metering] }), UsageLedgerModule],
    };
  }
}
