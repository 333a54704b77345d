import { Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { Histogram } from 'prom-client';
import type { DeploymentRecord } from '#tern/contracts';
import { DeploymentsRepository } from '#tern/persistence';
import { Ticker } from '#tern/timing';
import { REQUEST_SECONDS_BUCKETS, RequestTally } from './request-tally.js';

/** How often a gateway adds its counts to endpoint_request_minutes. */
const FLUSH_MS = 5000;

const requestSeconds = new Histogram({
  name: 'tern_endpoint_request_duration_seconds',
  help: 'Endpoint requests per deployment version, from arrival at the gateway to the response sent, by status code',
  labelNames: ['deployment_id', 'deployment', 'version', 'status'],
  buckets: REQUEST_SECONDS_BUCKETS,
});

/**
 * Endpoint requests per deployment: on /metrics (Prometheus), and per minute in Postgres for
 * the public API (`GET /api/v1/deployments/<name>/requests`, the dashboard's chart). A gateway
 * adds its counts every FLUSH_MS and at shutdown; a crash loses at most that much.
 */
@Injectable()
export class RequestStats implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('request-stats');
  private readonly tally = new RequestTally();
  private ticker?: Ticker;

  constructor(private readonly deployments: DeploymentsRepository) {}

  onApplicationBootstrap() {
    this.ticker = new Ticker({ name: 'request stats', everyMs: FLUSH_MS, logger: this.logger }, () => this.flush()).start();
  }

  async onApplicationShutdown() {
    await this.ticker?.stop();
    await this.flush().catch((e: unknown) => this.logger.warn(`request stats not saved at shutdown: ${(e as Error).message}`));
  }

  /** Counts the request once its response is sent (or the caller hung up), whatever answered it. */
  observe(record: DeploymentRecord, raw: { once(event: 'close', fn: () => void): unknown; statusCode: number }): void {
    const started = performance.now();
    raw.once('close', () => {
      const seconds = (performance.now() - started) / 1000;
      requestSeconds.observe(
        { deployment_id: record.deploymentId, deployment: record.name, version: String(record.version), status: String(raw.statusCode) },
        seconds,
      );
      this.tally.add(record.deploymentId, record.version, new Date(), seconds, raw.statusCode);
    });
  }

  async flush(): Promise<void> {
    const rows = this.tally.drain();
    try {
      await this.deployments.addRequestMinutes(rows);
    } catch (e) {
      this.tally.restore(rows);
      throw e;
    }
  }
}
