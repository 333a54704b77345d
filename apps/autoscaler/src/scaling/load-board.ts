import { Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { Counter } from 'prom-client';
import type { Subscription } from '@nats-io/transport-node';
import {
  combineLoads,
  type GatewayLoad,
  LOAD_REPORT_MAX_AGE_MS,
  type Observation,
  SERVER_LOAD_MAX_AGE_MS,
  type ServerLoad,
  withBacklog,
  withServerLoads,
} from '#tern/autoscaling';
import {
  AGENT_LOAD_REPORT,
  type AgentLoadReport,
  deploymentKey,
  LOAD_REPORT,
  type LoadReport,
  ROUTES_BUCKET,
  type RouteRecord,
  SERVER_LOAD_REPORT,
  type ServerLoadReport,
} from '#tern/contracts';
import { KvMirror, Messaging } from '#tern/messaging';
import { placedPartOf, placedServerLoads, UNPLACED_WARN_AFTER_MS, UnplacedStreaks } from './machine-reports.js';

const refusedReports = new Counter({
  name: 'tern_autoscaler_machine_reports_refused_total',
  help: "Machines' load reports not counted: they named only containers the scheduler did not place on them for that version.",
});

const refusedServerLoads = new Counter({
  name: 'tern_autoscaler_server_loads_refused_total',
  help: 'Container loads in server-load reports not counted: the container was not placed on the reporting machine for that version.',
});

/**
 * The latest LoadReport of every gateway replica per deployment version (core NATS: a lost one
 * is replaced a second later), plus backlog events that arrive before any report says so.
 */
@Injectable()
export class LoadBoard implements OnApplicationBootstrap, OnApplicationShutdown {
  /** `<deploymentId>.<version>` → gatewayId → its latest report. */
  private readonly reports = new Map<string, Map<string, GatewayLoad>>();
  private readonly backlogs = new Map<string, { held: number; receivedAt: number }>();
  /** `<deploymentId>.<version>` → containerId → the load its server last reported (target_load). */
  private readonly serverLoads = new Map<string, Map<string, ServerLoad>>();
  private readonly unplaced = new UnplacedStreaks();
  private subscriptions: Subscription[] = [];
  private readonly logger = new Logger('load-board');
  /** The scheduler's ready containers (key: container id): which machine runs what, to check machines' reports against. */
  private readonly routes: KvMirror<RouteRecord>;

  constructor(private readonly messaging: Messaging) {
    this.routes = new KvMirror<RouteRecord>({
      bucket: ROUTES_BUCKET.name,
      open: () => messaging.kv({ name: ROUTES_BUCKET.name }),
      logger: this.logger,
    });
  }

  onApplicationBootstrap() {
    // No queue group: every replica keeps the whole picture, so a new leader acts at once.
    this.routes.start();
    this.subscriptions = [
      this.messaging.listen(LOAD_REPORT, (report) => this.record(report, Date.now())),
      this.messaging.listen(AGENT_LOAD_REPORT, (report) => this.recordMachineReport(report, Date.now())),
      this.messaging.listen(SERVER_LOAD_REPORT, (report) => this.recordServerLoads(report, Date.now())),
    ];
  }

  async onApplicationShutdown() {
    for (const s of this.subscriptions) s.unsubscribe();
    await this.routes.stop();
  }

  /**
   * A machine's report counts only for the containers placed on it (see placedPartOf). Refused
   * reports are counted; a warning comes only when they go on (UnplacedStreaks), not for the
   * first reports of a container whose route is still on its way.
   */
  recordMachineReport(report: AgentLoadReport, now: number) {
    const key = deploymentKey(report.deploymentId, report.version);
    const placed = placedPartOf(report, (id) => this.routes.get(id));
    if (placed) {
      this.unplaced.counted(key, report.machineId);
      return this.record(placed, now);
    }
    refusedReports.inc();
    if (!this.unplaced.refused(key, report.machineId, now)) return;
    this.logger.warn(
      { machineId: report.machineId, deploymentId: report.deploymentId, version: report.version },
      `ignored the load reports of machine ${report.machineId} for ${UNPLACED_WARN_AFTER_MS / 1000} s: none of the containers they name is placed there for ${report.deploymentId} v${report.version}`,
    );
  }

  /** Only the loads of containers placed on the reporting machine count (placedServerLoads); the rest are counted as refused. */
  recordServerLoads(report: ServerLoadReport, now: number) {
    const routeOf = (id: string) => this.routes.get(id);
    const placed = placedServerLoads(report, routeOf);
    if (placed.length < report.containers.length) refusedServerLoads.inc(report.containers.length - placed.length);
    if (placed.length === 0) return;
    const key = deploymentKey(report.deploymentId, report.version);
    let byContainer = this.serverLoads.get(key);
    if (!byContainer) this.serverLoads.set(key, (byContainer = new Map()));
    for (const c of placed) {
      const readyAt = Date.parse(routeOf(c.containerId)?.readyAt ?? '');
      byContainer.set(c.containerId, { load: c.load, receivedAt: now, readyAt: Number.isFinite(readyAt) ? readyAt : now });
    }
  }

  record(r: LoadReport, now: number) {
    const key = deploymentKey(r.deploymentId, r.version);
    let byGateway = this.reports.get(key);
    if (!byGateway) this.reports.set(key, (byGateway = new Map()));
    byGateway.set(r.gatewayId, { ...r, receivedAt: now });
  }

  recordBacklog(key: string, held: number, now: number) {
    this.backlogs.set(key, { held, receivedAt: now });
  }

  observe(key: string, now: number): Observation {
    const byGateway = this.reports.get(key);
    for (const [gatewayId, r] of byGateway ?? []) if (now - r.receivedAt > LOAD_REPORT_MAX_AGE_MS) byGateway!.delete(gatewayId);
    const observation = this.withServerLoads(key, combineLoads(byGateway?.values() ?? [], now), now);
    const backlog = this.backlogs.get(key);
    if (!backlog) return observation;
    if (now - backlog.receivedAt > LOAD_REPORT_MAX_AGE_MS) {
      this.backlogs.delete(key);
      return observation;
    }
    return withBacklog(observation, backlog.held);
  }

  private withServerLoads(key: string, o: Observation, now: number): Observation {
    const loads = this.serverLoads.get(key);
    if (!loads) return o;
    for (const [id, l] of loads) if (now - l.receivedAt > SERVER_LOAD_MAX_AGE_MS) loads.delete(id);
    return withServerLoads(o, loads, now);
  }

  forget(key: string) {
    this.reports.delete(key);
    this.serverLoads.delete(key);
    this.backlogs.delete(key);
    this.unplaced.forget(key);
  }
}
