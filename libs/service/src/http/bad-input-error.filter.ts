import { type ArgumentsHost, BadRequestException, Catch, Logger, ServiceUnavailableException } from '@nestjs/common';
import { BaseExceptionFilter } from '@nestjs/core';
import { BaseRpcExceptionFilter } from '@nestjs/microservices';
import type { FastifyReply } from 'fastify';
import { QueryFailedError } from 'typeorm';
import { badInputOf } from '#tern/persistence';
import { databasePort, databaseUnavailable } from './database-unavailable.js';

/** What a caller is told to wait before retrying while Postgres is unreachable (a restart, a failover). */
export const DATABASE_RETRY_AFTER_SECONDS = 5;

/**
 * The last line behind request-intake.ts: a query that failed on a value from the request
 * (invalid uuid text, a value too long for its column, …) answers 400 naming the value's
 * fault instead of 500; a request that could not reach Postgres (refused, reset, shutting down,
 * no pooled connection in time) answers 503 with Retry-After. Everything else goes on to Nest's
 * filter: HttpExceptions as they are, anything unexpected a logged 500. Message handlers (the
 * microservice inherits the app's filters) keep their own handling.
 */
@Catch()
export class BadInputErrorFilter extends BaseExceptionFilter {
  private readonly logger = new Logger('HTTP');
  private readonly rpc = new BaseRpcExceptionFilter();
  private readonly database: { port?: number };

  constructor(adapter: ConstructorParameters<typeof BaseExceptionFilter>[0], databaseUrl: string) {
    super(adapter);
    this.database = { port: databasePort(databaseUrl) };
  }

  override catch(exception: unknown, host: ArgumentsHost) {
    if (host.getType() !== 'http') return this.rpc.catch(exception, host);
    const unreachable = databaseUnavailable(exception, this.database);
    if (unreachable) {
      this.logger.warn(`answered 503: the database is unavailable (${unreachable})`);
      host.switchToHttp().getResponse<FastifyReply>().header('retry-after', String(DATABASE_RETRY_AFTER_SECONDS));
      return super.catch(new ServiceUnavailableException(`the database is unavailable; retry in ${DATABASE_RETRY_AFTER_SECONDS} s`), host);
    }
    const problem = exception instanceof QueryFailedError ? badInputOf(exception) : undefined;
    if (!problem) return super.catch(exception, host);
    this.logger.warn(`answered 400 to a query that failed on the request's input: ${problem}`);
    return super.catch(new BadRequestException(problem), host);
  }
}
