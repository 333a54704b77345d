import { Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import type { Subscription } from '@nats-io/transport-node';
import { combineLoads, type GatewayLoad, LOAD_REPORT_MAX_AGE_MS, type Observation, withBacklog } from '#tern/autoscaling';
import { AGENT_LOAD_REPORT, deploymentKey, LOAD_REPORT, type LoadReport } from '#tern/contracts';
import { Messaging } from '#tern/messaging';

/**
 * The latest LoadReport of every gateway replica per deployment version (core NATS: a lost one
 * is replaced a second later), plus backlog events that arrive before any report says so.
 */
@Injectable()
export class LoadBoard implements OnApplicationBootstrap, OnApplicationShutdown {
  /** `<deploymentId>.<version>` → gatewayId → its latest report. */
  private readonly reports = new Map<string, Map<string, GatewayLoad>>();
  private readonly backlogs = new Map<string, { held: number; receivedAt: number }>();
  private subscriptions: Subscription[] = [];

  constructor(private readonly messaging: Messaging) {}

  onApplicationBootstrap() {
    // No queue group: every replica keeps the whole picture, so a new leader acts at once.
    this.subscriptions = [
      this.messaging.listen(LOAD_REPORT, (report) => this.record(report, Date.now())),
      // A machine's report is keyed by the machine its subject names, whatever reporter id it claims.
      this.messaging.listen(AGENT_LOAD_REPORT, (report) => this.record({ ...report, gatewayId: `agent-${report.machineId}` }, Date.now())),
    ];
  }

  onApplicationShutdown() {
    for (const s of this.subscriptions) s.unsubscribe();
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
    const observation = combineLoads(byGateway?.values() ?? [], now);
    const backlog = this.backlogs.get(key);
    if (!backlog) return observation;
    if (now - backlog.receivedAt > LOAD_REPORT_MAX_AGE_MS) {
      this.backlogs.delete(key);
      return observation;
    }
    return withBacklog(observation, backlog.held);
  }

  forget(key: string) {
    this.reports.delete(key);
    this.backlogs.delete(key);
  }
}
