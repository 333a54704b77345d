import { type DynamicModule, Module } from '@nestjs/common';
import { ConfigModule, type TernConfig } from '#tern/config';
import { type StreamName } from '#tern/contracts';
import { MessagingModule } from '#tern/messaging';
import { ObservabilityModule } from '#tern/observability';
import { PersistenceModule } from '#tern/persistence';
import { PRESENCE_METADATA, PresenceService } from './presence.service.js';
import { STREAMS_TO_DECLARE, StreamDeclarations } from './stream-declarations.js';

export interface CoreOptions {
  /** Connect to Postgres, run migrations, check it in readiness. */
  database: boolean;
  /** Streams this service owns or writes to; declared (idempotently) before it serves. */
  streams: StreamName[];
  /** Serve /health/ready as this process's own readiness (false on the gateway). */
  readiness?: boolean;
  /** Extra fields in the $SRV.INFO metadata (the agent adds its machine id and pool). */
  presence?: Record<string, string>;
}

/** What every Tern service stands on: config, NATS, Postgres when used, health, metrics, presence. */
@Module({})
export class CoreModule {
  static forRoot(config: TernConfig, options: CoreOptions): DynamicModule {
    return {
      module: CoreModule,
      global: true,
      imports: [
        ConfigModule.forRoot(config),
        MessagingModule.forRoot(),
        ...(options.database ? [PersistenceModule.forRoot()] : []),
        ObservabilityModule.forRoot({ database: options.database, readiness: options.readiness }),
      ],
      providers: [
        { provide: PRESENCE_METADATA, useValue: options.presence ?? {} },
        { provide: STREAMS_TO_DECLARE, useValue: options.streams },
        StreamDeclarations,
        PresenceService,
      ],
      exports: [ConfigModule, MessagingModule, ObservabilityModule, ...(options.database ? [PersistenceModule] : [])],
    };
  }
}
