import { Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { type StreamName } from '#tern/contracts';
import { Messaging } from '#tern/messaging';

export const STREAMS_TO_DECLARE = Symbol('STREAMS_TO_DECLARE');

/** Declares a service's streams at start, before any consumer binds to them. */
@Injectable()
export class StreamDeclarations implements OnModuleInit {
  private readonly logger = new Logger('streams');

  constructor(
    private readonly messaging: Messaging,
    @Inject(STREAMS_TO_DECLARE) private readonly streams: StreamName[],
  ) {}

  async onModuleInit() {
    await this.messaging.ensureStreams(this.streams);
    if (this.streams.length) this.logger.log(`streams ready: ${this.streams.map((s) => this.messaging.ns.stream(s)).join(', ')}`);
  }
}
