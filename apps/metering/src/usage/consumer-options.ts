import { type ConsumeExtras } from '#tern/messaging';

/**
 * Every metering consumer: durable (named after the service and subject), replaying EVENTS from
 * its start when first created and resuming after its last ack when restarted. Handlers are
 * short transactions, so a 10 s ack wait is ample; it is how long a restarted metering waits for
 * the messages its killed predecessor had been handed but not acknowledged.
 */
export const CONSUMER: ConsumeExtras = { deliver: 'all', ackWaitMs: 10_000 };
