import { HttpException } from '@nestjs/common';
import { STATUS_CODES } from 'node:http';

/** A task API failure with the HTTP status to answer and a message that says what to fix. */
export class TaskHttpError extends HttpException {
  constructor(status: number, message: string) {
    super({ statusCode: status, error: STATUS_CODES[status] ?? 'Error', message }, status);
  }
}
