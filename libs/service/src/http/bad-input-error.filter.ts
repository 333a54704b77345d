import { type ArgumentsHost, BadRequestException, Catch, Logger } from '@nestjs/common';
import { BaseExceptionFilter } from '@nestjs/core';
import { BaseRpcExceptionFilter } from '@nestjs/microservices';
import { QueryFailedError } from 'typeorm';
import { badInputOf } from '#tern/persistence';

/**
 * The last line behind request-intake.ts: a query that failed on a value from the request
 * (invalid uuid text, a value too long for its column, …) answers 400 naming the value's
 * fault instead of 500. Every other query failure goes on to Nest's filter: a logged 500.
 * Message handlers (the microservice inherits the app's filters) keep their own handling.
 */
@Catch(QueryFailedError)
export class BadInputErrorFilter extends BaseExceptionFilter {
  private readonly logger = new Logger('HTTP');
  private readonly rpc = new BaseRpcExceptionFilter();

  override catch(exception: QueryFailedError, host: ArgumentsHost) {
    if (host.getType() !== 'http') return this.rpc.catch(exception, host);
    const problem = badInputOf(exception);
    if (!problem) return super.catch(exception, host);
    this.logger.warn(`answered 400 to a query that failed on the request's input: ${problem}`);
    return super.catch(new BadRequestException(problem), host);
  }
}
