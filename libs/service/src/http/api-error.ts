import { STATUS_CODES } from 'node:http';
import { HttpException } from '@nestjs/common';

/**
 * An API failure: the status to answer and a message that says what to fix. Raised anywhere
 * under a controller or route; the global exception filter (BadInputErrorFilter) answers it as
 * `{ statusCode, error, message }`, the same shape as Nest's own exceptions.
 */
export class ApiError extends HttpException {
  constructor(status: number, message: string) {
    super({ statusCode: status, error: STATUS_CODES[status] ?? 'Error', message }, status);
  }
}
