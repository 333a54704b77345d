import { type DynamicModule, Global, Inject, Logger, Module, type OnApplicationShutdown } from '@nestjs/common';
import { type NatsConnection } from '@nats-io/transport-node';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { inboxPrefix } from '#tern/nats-auth';
import { connectNats } from './connection.js';
import { Messaging } from './messaging.js';
import { Namespace } from './namespace.js';

export const NATS_CONNECTION = Symbol('NATS_CONNECTION');

const inboxOf = (config: TernConfig) => inboxPrefix(config.nats.namespace, config.service, config.machineId);

/** One NATS connection per process, shared by the transport, health checks and services. */
@Global()
@Module({})
export class MessagingModule implements OnApplicationShutdown {
  private readonly logger = new Logger('messaging');

  constructor(@Inject(NATS_CONNECTION) private readonly nc: NatsConnection) {}

  static forRoot(): DynamicModule {
    return {
      module: MessagingModule,
      providers: [
        {
          provide: NATS_CONNECTION,
          inject: [TERN_CONFIG],
          useFactory: (config: TernConfig) =>
            connectNats({ ...config.nats, name: `${config.nats.namespace}-${config.service}`, inboxPrefix: inboxOf(config) }),
        },
        {
          provide: Messaging,
          inject: [NATS_CONNECTION, TERN_CONFIG],
          // An agent is a machine's: it declares nothing, the control plane does.
          useFactory: (nc: NatsConnection, config: TernConfig) =>
            new Messaging(nc, new Namespace(config.nats.namespace), inboxOf(config), config.service !== 'agent', config.nats.replicas),
        },
      ],
      exports: [NATS_CONNECTION, Messaging],
    };
  }

  async onApplicationShutdown() {
    if (this.nc.isClosed()) return;
    try {
      await this.nc.drain();
      this.logger.log('NATS connection drained');
    } catch (e) {
      this.logger.warn(`drain failed: ${(e as Error).message}`);
    }
  }
}
