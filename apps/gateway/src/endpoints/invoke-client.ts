import { Injectable } from '@nestjs/common';
import { invoke, type InvokeOptions, type InvokeRequestHead, type InvokeResponse, type InvokeTarget, Messaging } from '#tern/messaging';

/**
 * The gateway's end of an invoke: one request sent to one container over NATS. The I/O sits
 * behind this class, as a repository's SQL does, so that what the endpoints decide around it
 * (which container, when to try another) is tested through the service seam.
 */
@Injectable()
export class InvokeClient {
  constructor(private readonly messaging: Messaging) {}

  send(target: InvokeTarget, request: InvokeRequestHead, body: Uint8Array, opts: InvokeOptions = {}): Promise<InvokeResponse> {
    return invoke(this.messaging, target, request, body, opts);
  }
}
