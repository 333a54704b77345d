import { headers as natsHeaders, type MsgHdrs, type NatsConnection } from '@nats-io/transport-node';
import { INVOKE_HEADERS } from '#tern/contracts';

/** Body bytes per response message: small enough to interleave many streams on one connection. */
export const CHUNK_BYTES = 256 * 1024;
/** The most a response body may carry; the gateway's request limit, mirrored. */
export const MAX_RESPONSE_BYTES = 16 * 1024 * 1024;

/** How often a server says it is still working on a request. */
export const KEEPALIVE_MS = 1000;
/** Room left in a message for the headers when the body travels inline. */
const HEADER_ROOM = 64 * 1024;

/** Largest request body sent inline; larger ones go through the `bodies` object store. */
export function inlineBodyLimit(nc: NatsConnection): number {
  const max = nc.info?.max_payload ?? 1024 * 1024;
  return Math.max(0, max - HEADER_ROOM);
}

/** An invoke that ended in an error, with the HTTP status the gateway should answer. */
export class InvokeError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
    this.name = 'InvokeError';
  }
}

/**
 * JSON for a NATS header value: JSON already escapes control characters; non-ASCII is
 * escaped too so the value survives any header encoding on the way.
 */
export function headerJson(value: unknown): string {
  return JSON.stringify(value).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

export function oneLine(message: string): string {
  return message.replace(/[\r\n]+/g, ' ').slice(0, 1000);
}

export function errorHeaders(seq: number, code: number, message: string): MsgHdrs {
  const h = natsHeaders();
  h.set(INVOKE_HEADERS.seq, String(seq));
  h.set(INVOKE_HEADERS.end, '1');
  h.set(INVOKE_HEADERS.error, oneLine(message) || 'error');
  h.set(INVOKE_HEADERS.errorCode, String(code));
  return h;
}
