import { RpcException } from '@nestjs/microservices';

/** Header carrying an error instead of a reply payload on core request/reply. */
export const ERROR_HEADER = 'Tern-Error';
export const ERROR_CODE_HEADER = 'Tern-Error-Code';

/** A request answered with an error: `code` follows HTTP (400 bad payload, 404, 409, 500, 503 nobody listening, 504 timeout). */
export class RequestError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly subject: string,
  ) {
    super(message);
    this.name = 'RequestError';
  }
}

/**
 * Throw from a request handler to answer with a code and message. An RpcException so it
 * passes through Nest's exception filter with its code intact.
 */
export class ReplyError extends RpcException {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super({ code, message });
    this.message = message;
    this.name = 'ReplyError';
  }
}
