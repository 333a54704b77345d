import { type BeforeApplicationShutdown, Inject, Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { type NatsConnection } from '@nats-io/transport-node';
import { type Service } from '@nats-io/services';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { announce, NATS_CONNECTION, Namespace } from '#tern/messaging';
import { TERN_VERSION } from '#tern/config';

export const PRESENCE_METADATA = Symbol('PRESENCE_METADATA');

/** Answers $SRV.PING/INFO as `<namespace>-<service>` from start-up until shutdown begins. */
@Injectable()
export class PresenceService implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private service?: Service;
  private readonly logger = new Logger('presence');

  constructor(
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
    @Inject(TERN_CONFIG) private readonly config: TernConfig,
    @Inject(PRESENCE_METADATA) private readonly metadata: Record<string, string>,
  ) {}

  async onApplicationBootstrap() {
    const ns = new Namespace(this.config.nats.namespace);
    this.service = await announce(this.nc, ns, this.config.service, TERN_VERSION, {
      ...this.metadata,
      host: (await import('node:os')).hostname(),
      pid: String(process.pid),
      startedAt: new Date().toISOString(),
    });
    this.logger.log(`announced as ${ns.service(this.config.service)} (${this.service.info().id})`);
  }

  async beforeApplicationShutdown(signal?: string) {
    this.logger.log(`shutting down${signal ? ` on ${signal}` : ''}: leaving the service registry`);
    await this.service?.stop().catch(() => undefined);
  }
}
