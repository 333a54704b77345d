import 'reflect-metadata';
import { readFileSync } from 'node:fs';
import { type DynamicModule, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { ConfigError, loadConfig, type ServiceName, type TernConfig } from '#tern/config';
import { JetStreamTransport, Messaging } from '#tern/messaging';
import { createLogger, initMetrics, PinoLoggerService } from '#tern/observability';
import { type Logger as Pino } from 'pino';
import { BadInputErrorFilter } from './http/bad-input-error.filter.js';
import { installHttpMetrics } from './http/http-metrics.js';
import { answerClientError, answerFrameworkError, HTTP_BODY_LIMIT, installRequestIntake, MAX_PARAM_LENGTH } from './http/request-intake.js';
import { RequestValidationPipe } from './http/request-validation.pipe.js';
import { prepareOpsListener } from './ops-listener.js';

export interface BootOptions {
  /** Builds the root module from the validated config. */
  module: (config: TernConfig) => DynamicModule;
  /** Called before listen, for HTTP-only concerns (OpenAPI on the gateway). */
  configureHttp?: (app: NestFastifyApplication, config: TernConfig) => void | Promise<void>;
  /**
   * Configuration the caller already loaded and completed; default loadConfig(service). The
   * agent passes one whose NATS servers and namespace came from its registration answer.
   */
  config?: TernConfig;
  /** A logger the caller made (the agent's writes to a file while its dashboard owns the terminal). */
  logger?: Pino;
}

/**
 * The whole of a service's main.ts: validated config, pino logger, Fastify HTTP (API or
 * health/metrics), the JetStream transport, graceful shutdown on SIGTERM/SIGINT.
 */
export async function bootstrap(service: ServiceName, options: BootOptions): Promise<INestApplication> {
  let config: TernConfig;
  try {
    config = options.config ?? loadConfig(service);
  } catch (e) {
    if (e instanceof ConfigError) {
      process.stderr.write(`tern ${service}: ${e.message}\nSee docs/configuration.md.\n`);
      process.exit(78); // EX_CONFIG
    }
    throw e;
  }
  const pino = options.logger ?? createLogger({ service, level: config.log.level, format: config.log.format });
  const logger = new PinoLoggerService(pino);
  process.on('unhandledRejection', (reason) => pino.error({ err: reason }, 'unhandled promise rejection'));
  initMetrics(service);

  const app = await NestFactory.create<NestFastifyApplication>(
    options.module(config),
    new FastifyAdapter({
      bodyLimit: HTTP_BODY_LIMIT,
      clientErrorHandler: answerClientError,
      frameworkErrors: answerFrameworkError,
      routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
      ...(config.http.tls ? { https: { cert: readFileSync(config.http.tls.certFile), key: readFileSync(config.http.tls.keyFile) } } : {}),
    }),
    {
      logger,
      bufferLogs: true,
    },
  );
  installRequestIntake(app);
  installHttpMetrics(app);
  app.useGlobalFilters(new BadInputErrorFilter(app.getHttpAdapter(), config.database.url));
  app.useGlobalPipes(new RequestValidationPipe());
  app.enableShutdownHooks();
  await options.configureHttp?.(app, config);
  const ops = prepareOpsListener(app, config);

  // Streams are declared during init; consumers bind to them when the transport starts.
  await app.init();
  // Named subject tokens for @OnRequest handlers that serve one concrete subject (the agent's machine id).
  const transport = new JetStreamTransport(app.get(Messaging), service, { machineId: config.machineId });
  app.connectMicroservice({ strategy: transport }, { inheritAppConfig: true });
  await app.startAllMicroservices();
  if (config.http.port > 0) {
    await app.listen(config.http.port, config.http.host);
    const scheme = config.http.tls ? 'https' : 'http';
    pino.info({ port: config.http.port }, `${service} listening on ${scheme}://${config.http.host}:${config.http.port}`);
    await ops?.listen(pino);
  } else {
    pino.info(`${service} started (no HTTP endpoint: HTTP_PORT=0)`);
  }
  return app;
}
