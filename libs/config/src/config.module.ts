import { type DynamicModule, Global, Module } from '@nestjs/common';
import { type TernConfig } from './config.js';

export const TERN_CONFIG = Symbol('TERN_CONFIG');

/** Makes the validated configuration injectable as TERN_CONFIG everywhere in a service. */
@Global()
@Module({})
export class ConfigModule {
  static forRoot(config: TernConfig): DynamicModule {
    return { module: ConfigModule, providers: [{ provide: TERN_CONFIG, useValue: config }], exports: [TERN_CONFIG] };
  }
}
