import { Logger } from '@nestjs/common';
import { AGENT_LOAD_REPORT, type AgentLoadReport, deploymentKey } from '#tern/contracts';
import type { Messaging } from '#tern/messaging';
import { smoothed, Ticker } from '#tern/timing';
import type { ContainerRecord } from '../containers/container-spec.js';

const REPORT_EVERY_MS = 1000;
/** Weight of the newest duration in the running mean. */
const DURATION_WEIGHT = 0.3;

interface ContainerLoad {
  readonly record: ContainerRecord;
  inFlight: number;
  /** When its last task finished (or it became ready): idle time counts from here. */
  idleSince: number;
}

/**
 * This machine's task-queue containers as the autoscaler needs them: a LoadReport per version
 * every second (the same message gateways send for endpoints; the agent reports as
 * `agent-<machineId>`), with tasks running per container, idle time and mean task duration.
 */
export class TaskLoads {
  private readonly logger = new Logger('task-loads');
  private readonly containers = new Map<string, ContainerLoad>();
  /**
   * Mean task duration per version key, smoothed (EWMA) and kept between reports: a version
   * whose tasks take minutes finishes one rarely, and request_latency needs the figure between.
   */
  private readonly meanMs = new Map<string, number>();
  /** Versions reported last time: one last empty report tells the autoscaler they are gone. */
  private reported = new Set<string>();
  private readonly ticker = new Ticker({ name: 'task load report', everyMs: REPORT_EVERY_MS, logger: this.logger }, () => this.report());

  constructor(
    private readonly messaging: Messaging,
    private readonly machineId: string,
  ) {}

  start() {
    this.ticker.start();
  }

  async stop() {
    await this.ticker.stop();
  }

  track(record: ContainerRecord) {
    this.containers.set(record.containerId, { record, inFlight: 0, idleSince: Date.now() });
  }

  untrack(containerId: string) {
    this.containers.delete(containerId);
  }

  begin(containerId: string) {
    const c = this.containers.get(containerId);
    if (c) c.inFlight++;
  }

  end(containerId: string, durationMs: number) {
    const c = this.containers.get(containerId);
    if (!c) return;
    c.inFlight = Math.max(0, c.inFlight - 1);
    if (c.inFlight === 0) c.idleSince = Date.now();
    const key = deploymentKey(c.record.deploymentId, c.record.deploymentVersion);
    this.meanMs.set(key, smoothed(this.meanMs.get(key), durationMs, DURATION_WEIGHT));
  }

  /** The version's mean task duration here (smoothed); undefined until one of its tasks has ended. */
  meanDurationMs(deploymentId: string, version: number): number | undefined {
    return this.meanMs.get(deploymentKey(deploymentId, version));
  }

  /** The reports for this moment, one per version with containers here (exported for tests). */
  reports(now: number): AgentLoadReport[] {
    const byVersion = new Map<string, ContainerLoad[]>();
    for (const c of this.containers.values()) {
      const key = deploymentKey(c.record.deploymentId, c.record.deploymentVersion);
      byVersion.set(key, [...(byVersion.get(key) ?? []), c]);
    }
    for (const key of this.reported) if (!byVersion.has(key)) byVersion.set(key, []);
    const at = new Date(now).toISOString();
    const out: AgentLoadReport[] = [];
    for (const [key, list] of byVersion) {
      const [deploymentId, version] = [key.slice(0, key.lastIndexOf('.')), Number(key.slice(key.lastIndexOf('.') + 1))];
      out.push({
        gatewayId: `agent-${this.machineId}`,
        machineId: this.machineId,
        deploymentId,
        version,
        inFlight: list.reduce((n, c) => n + c.inFlight, 0),
        buffered: 0,
        meanDurationMs: this.meanMs.get(key) ?? 0,
        containers: list.map((c) => ({
          containerId: c.record.containerId,
          inFlight: c.inFlight,
          idleSeconds: c.inFlight > 0 ? 0 : (now - c.idleSince) / 1000,
        })),
        at,
      });
    }
    for (const key of this.meanMs.keys()) if (!byVersion.has(key)) this.meanMs.delete(key);
    this.reported = new Set(out.filter((r) => r.containers.length).map((r) => deploymentKey(r.deploymentId, r.version)));
    return out;
  }

  private report() {
    for (const r of this.reports(Date.now())) this.messaging.emit(AGENT_LOAD_REPORT, r, [r.deploymentId]);
  }
}
