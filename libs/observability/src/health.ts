import { Controller, Get, Inject, Injectable, Optional } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import {
  HealthCheck,
  HealthCheckService,
  type HealthIndicatorFunction,
  HealthIndicatorService,
  TypeOrmHealthIndicator,
} from '@nestjs/terminus';
import { type NatsConnection } from '@nats-io/transport-node';
import { NATS_CONNECTION } from '#tern/messaging';
import { Public } from './public.js';

export const HEALTH_OPTIONS = Symbol('HEALTH_OPTIONS');
export interface HealthOptions {
  database: boolean;
}

@Injectable()
export class NatsHealthIndicator {
  constructor(
    private readonly indicators: HealthIndicatorService,
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
  ) {}

  /** Up when the connection is open and the server answers a ping within timeoutMs. */
  async isHealthy(key = 'nats', timeoutMs = 1000) {
    const check = this.indicators.check(key);
    if (this.nc.isClosed()) return check.down({ message: 'connection closed' });
    try {
      const rtt = await Promise.race([
        this.nc.rtt(),
        new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no answer in ${timeoutMs} ms`)), timeoutMs)),
      ]);
      return check.up({ server: this.nc.getServer(), rttMs: Math.round(rtt * 100) / 100 });
    } catch (e) {
      return check.down({ message: (e as Error).message });
    }
  }
}

/** This process's own dependencies: NATS, and Postgres for the services that use it. */
@Injectable()
export class SelfHealth {
  constructor(
    private readonly health: HealthCheckService,
    private readonly nats: NatsHealthIndicator,
    @Inject(HEALTH_OPTIONS) private readonly options: HealthOptions,
    @Optional() private readonly db?: TypeOrmHealthIndicator,
  ) {}

  check() {
    const checks: HealthIndicatorFunction[] = [() => this.nats.isHealthy()];
    if (this.options.database && this.db) checks.push(async () => this.db!.pingCheck('postgres', { timeout: 1500 }));
    return this.health.check(checks);
  }
}

@ApiTags('health')
@Public()
@Controller('health')
export class LivenessController {
  constructor(private readonly self: SelfHealth) {}

  /** The process is running and its event loop answers. */
  @Get('live')
  live() {
    return { status: 'ok', uptimeSeconds: Math.round(process.uptime()) };
  }

  /** This process can reach what it depends on (NATS, Postgres). */
  @Get('self')
  @HealthCheck()
  selfCheck() {
    return this.self.check();
  }
}

/** /health/ready on every service but the gateway, whose /health/ready reports the whole system. */
@ApiTags('health')
@Public()
@Controller('health')
export class ReadinessController {
  constructor(private readonly self: SelfHealth) {}

  @Get('ready')
  @HealthCheck()
  ready() {
    return this.self.check();
  }
}
