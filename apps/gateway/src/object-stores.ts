import { Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { RESULTS_BUCKET } from '#tern/contracts';
import { bodiesStore, Messaging } from '#tern/messaging';

/**
 * The object stores agents use, created at start by the gateway that owns them: agents declare
 * nothing, so a large request body or task result must find its store already there.
 */
@Injectable()
export class ObjectStoresDeclaration implements OnModuleInit {
  private readonly logger = new Logger('object-stores');

  constructor(private readonly messaging: Messaging) {}

  async onModuleInit() {
    await bodiesStore(this.messaging);
    await this.messaging.objectStore({ name: RESULTS_BUCKET.name });
    this.logger.log('object stores ready: bodies, results');
  }
}
