import { type LoggerService } from '@nestjs/common';
import { pino, type Logger as Pino } from 'pino';

export interface LogOptions {
  service: string;
  level: string;
  format: 'auto' | 'json' | 'pretty';
}

/** JSON lines for machines; pino-pretty when a person is watching (a TTY, or LOG_FORMAT=pretty). */
export function createLogger(opts: LogOptions): Pino {
  const pretty = opts.format === 'pretty' || (opts.format === 'auto' && process.stdout.isTTY === true);
  return pino({
    level: opts.level,
    base: { service: opts.service, pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
    transport: pretty
      ? { target: 'pino-pretty', options: { colorize: true, ignore: 'pid,hostname', translateTime: 'HH:MM:ss.l' } }
      : undefined,
  });
}

/**
 * Routes Nest's Logger calls into pino. Nest passes the logger's context as the last string
 * argument; an object first argument becomes structured fields.
 */
export class PinoLoggerService implements LoggerService {
  constructor(readonly pino: Pino) {}

  log(message: unknown, ...params: unknown[]) {
    this.write('info', message, params);
  }
  error(message: unknown, ...params: unknown[]) {
    this.write('error', message, params);
  }
  warn(message: unknown, ...params: unknown[]) {
    this.write('warn', message, params);
  }
  debug(message: unknown, ...params: unknown[]) {
    this.write('debug', message, params);
  }
  verbose(message: unknown, ...params: unknown[]) {
    this.write('trace', message, params);
  }
  fatal(message: unknown, ...params: unknown[]) {
    this.write('fatal', message, params);
  }

  private write(level: 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal', message: unknown, params: unknown[]) {
    const rest = [...params];
    const context = rest.length && typeof rest[rest.length - 1] === 'string' ? (rest.pop() as string) : undefined;
    const fields: Record<string, unknown> = context ? { context } : {};
    if (message instanceof Error) {
      this.pino[level]({ ...fields, err: message }, message.message);
    } else if (message && typeof message === 'object') {
      const text = typeof rest[0] === 'string' ? (rest.shift() as string) : undefined;
      this.pino[level]({ ...fields, ...(message as object) }, text ?? '');
    } else {
      // Nest's error(message, stack) form: keep the stack as a field.
      if (level === 'error' && typeof rest[0] === 'string' && rest[0].includes('\n')) fields.stack = rest.shift();
      this.pino[level](fields, String(message));
    }
  }
}
