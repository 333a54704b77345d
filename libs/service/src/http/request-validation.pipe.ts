import { type ArgumentMetadata, UnsupportedMediaTypeException, ValidationPipe } from '@nestjs/common';
import { Stream } from 'node:stream';

/**
 * The ValidationPipe every service's routes and handlers go through (habit 2), which also
 * refuses bytes where a DTO is expected: binary content types reach handlers as the raw
 * request stream (code uploads, the network test), and class-transformer walking a socket's
 * native handle aborts the process.
 *
 * A value that already is an instance of the declared class is passed through as it comes: an
 * HTTP body is parsed JSON, never one, so only in-process code made it, and here that is the
 * JetStream transport, which decodes every message against its contract's class with the same
 * rules (libs/messaging codec.ts: whitelist, forbidNonWhitelisted) and hands over an instance of
 * it or nothing (Nest gives a message payload the param type `body` too). Validating it a second
 * time here was a fifth of the scheduler's and reputation's CPU per heartbeat (bench/agents README).
 */
export class RequestValidationPipe extends ValidationPipe {
  constructor() {
    super({ whitelist: true, forbidNonWhitelisted: true, transform: true, stopAtFirstError: false });
  }

  override async transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    if (validatedByTransport(value, metadata)) return value;
    if (metadata.type === 'body' && this.toValidate(metadata) && (value instanceof Stream || ArrayBuffer.isView(value))) {
      throw new UnsupportedMediaTypeException('this route takes a JSON body: send it with content-type application/json');
    }
    return super.transform(value, metadata);
  }
}

/** Made by in-process code that validated it (see above); a builtin (Object, Array...) proves nothing. */
function validatedByTransport(value: unknown, metadata: ArgumentMetadata): boolean {
  const cls = metadata.metatype;
  return !!cls && !BUILTINS.has(cls) && value instanceof cls;
}

const BUILTINS = new Set<unknown>([Object, Array, String, Number, Boolean, Date, Buffer]);
