import { type ArgumentMetadata, UnsupportedMediaTypeException, ValidationPipe } from '@nestjs/common';
import { Stream } from 'node:stream';

/**
 * The ValidationPipe every service's routes and handlers go through (habit 2), which also
 * refuses bytes where a DTO is expected: binary content types reach handlers as the raw
 * request stream (code uploads, the network test), and class-transformer walking a socket's
 * native handle aborts the process.
 */
export class RequestValidationPipe extends ValidationPipe {
  constructor() {
    super({ whitelist: true, forbidNonWhitelisted: true, transform: true, stopAtFirstError: false });
  }

  override async transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    if (metadata.type === 'body' && this.toValidate(metadata) && (value instanceof Stream || ArrayBuffer.isView(value))) {
      throw new UnsupportedMediaTypeException('this route takes a JSON body: send it with content-type application/json');
    }
    return super.transform(value, metadata);
  }
}
