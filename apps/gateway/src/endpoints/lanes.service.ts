import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { LOAD_REPORT, SCALE_BACKLOG } from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import { Ticker } from '#tern/timing';
import { Lane } from './lane.js';
import { RoutesMirror } from './routes-mirror.js';

const REPORT_EVERY_MS = 1_000;

/**
 * One Lane per endpoint version, kept in step with the routing table, and the once-a-second
 * LoadReport (and backlog nudge while requests wait) the autoscaler decides from.
 */
@Injectable()
export class LanesService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('endpoint-lanes');
  private readonly lanes = new Map<string, Lane>();
  /** Names this replica in load reports; the autoscaler keeps the latest report per id. */
  readonly gatewayId = `gw-${hostname().replace(/[^A-Za-z0-9_-]/g, '-')}-${randomBytes(3).toString('hex')}`;
  private readonly ticker = new Ticker({ name: 'load report', everyMs: REPORT_EVERY_MS, logger: this.logger, unref: true }, () =>
    this.tick(),
  );

  constructor(
    private readonly messaging: Messaging,
    private readonly table: RoutesMirror,
    @Inject(TERN_CONFIG) private readonly config: TernConfig,
  ) {}

  onApplicationBootstrap(): void {
    this.table.onChange((deploymentId, version) => this.sync(deploymentId, version));
    this.ticker.start();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.ticker.stop();
  }

  lane(deploymentId: string, version: number): Lane {
    const key = `${deploymentId}.${version}`;
    let lane = this.lanes.get(key);
    if (!lane) {
      lane = new Lane(deploymentId, version, this.config.endpoints.bufferSize);
      this.lanes.set(key, lane);
      lane.setRoutes(this.table.routesOf(deploymentId, version));
    }
    return lane;
  }

  /** Asks for a container at once (a scale-from-zero), not at the autoscaler's next tick. */
  askForCapacity(lane: Lane): void {
    if (!lane.buffered) return;
    this.messaging
      .publish(SCALE_BACKLOG, {
        deploymentId: lane.deploymentId,
        heldRequests: lane.buffered,
        oldestWaitMs: lane.oldestWaitMs,
        at: new Date().toISOString(),
      })
      .catch((e) => this.logger.warn(`could not publish backlog for ${lane.deploymentId}: ${(e as Error).message}`));
  }

  private sync(deploymentId: string, version: number): void {
    const lane = this.lanes.get(`${deploymentId}.${version}`);
    if (!lane) return;
    lane.setRoutes(this.table.routesOf(deploymentId, version));
    const record = this.table.record(deploymentId, version);
    if (!record || record.state === 'stopped') lane.rejectAll();
  }

  private tick(): void {
    for (const [key, lane] of this.lanes) {
      if (!lane.active) {
        // Idle and without containers: forget it; it comes back with the next request.
        if (!this.table.record(lane.deploymentId, lane.version)) this.lanes.delete(key);
        continue;
      }
      const report = lane.takeReport();
      try {
        this.messaging.emit(
          LOAD_REPORT,
          { gatewayId: this.gatewayId, deploymentId: lane.deploymentId, version: lane.version, ...report, at: new Date().toISOString() },
          [lane.deploymentId],
        );
      } catch (e) {
        this.logger.warn(`could not publish load report for ${key}: ${(e as Error).message}`);
      }
      this.askForCapacity(lane);
    }
  }
}
