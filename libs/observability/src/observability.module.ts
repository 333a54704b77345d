import { type DynamicModule, Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { HEALTH_OPTIONS, LivenessController, NatsHealthIndicator, ReadinessController, SelfHealth } from './health.js';
import { MetricsController } from './metrics.js';

export interface ObservabilityOptions {
  /** Check Postgres in readiness. */
  database: boolean;
  /** Serve /health/ready from this module (false on the gateway, which serves the system view). */
  readiness?: boolean;
}

@Module({})
export class ObservabilityModule {
  static forRoot(options: ObservabilityOptions): DynamicModule {
    return {
      module: ObservabilityModule,
      imports: [TerminusModule.forRoot({ logger: false, errorLogStyle: 'json' })],
      controllers: [LivenessController, MetricsController, ...(options.readiness === false ? [] : [ReadinessController])],
      providers: [{ provide: HEALTH_OPTIONS, useValue: { database: options.database } }, NatsHealthIndicator, SelfHealth],
      exports: [NatsHealthIndicator, SelfHealth],
    };
  }
}
