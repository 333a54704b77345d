import { type Logger } from '@nestjs/common';
import { CONTAINER_LOG_LINE, CRASH_LOG_LINE_CHARS, CRASH_LOG_LINES, type Contract, type VolumeCommitAnswer } from '#tern/contracts';
import { type Messaging } from '#tern/messaging';
import { backoffMs, sleep } from '#tern/timing';
import { type AgentContext } from '../agent-context.js';
import { containerEventsTotal } from '../metrics.js';
import { type ContainerRecord } from './container-spec.js';
import { type Tracked } from './tracked-container.js';

/** Longest log line sent over NATS; the rest is cut (the runtime already splits runaway lines). */
const MAX_LOG_LINE = 16 * 1024;

/** Between tries of a container event: 1 s, 2 s, 4 s … at most 30 s. */
const EVENT_RETRY_BACKOFF = { firstMs: 1000, maxMs: 30_000 };

/** The fields of a container event that ContainerEvents fills in itself. */
type OwnFields = 'containerId' | 'deploymentId' | 'deploymentVersion' | 'workspaceId' | 'machineId' | 'at';

/**
 * What the agent says about its containers: lifecycle events (JetStream, Nats-Msg-Id
 * `<container>:<event>`) and output lines (core NATS, and the dashboard).
 */
export class ContainerEvents {
  constructor(
    private readonly messaging: Messaging,
    private readonly ctx: AgentContext,
    private readonly logger: Logger,
  ) {}

  private get machineId(): string {
    return this.ctx.registration.machineId;
  }

  /**
   * A container event, retried while NATS is away: metering and the scheduler must not miss one.
   * Events that end a container's usage (`untilSent`) are retried for as long as it takes, since
   * a lost one would leave the container accruing usage; the others give up after ten tries.
   * `at` is when it happened (a container's exit time, not when the report got out).
   */
  async publish<T extends object>(
    contract: Contract<T>,
    record: ContainerRecord,
    name: string,
    fields: Omit<T, OwnFields>,
    opts: { at?: string; untilSent?: boolean } = {},
  ): Promise<void> {
    const payload = {
      containerId: record.containerId,
      deploymentId: record.deploymentId,
      deploymentVersion: record.deploymentVersion,
      workspaceId: record.workspaceId,
      machineId: this.machineId,
      at: opts.at ?? new Date().toISOString(),
      ...fields,
    } as unknown as T;
    for (let attempt = 1; ; attempt++) {
      try {
        await this.messaging.publish(contract, payload, { msgId: `${record.containerId}:${name}` });
        containerEventsTotal.inc({ event: name });
        return;
      } catch (e) {
        if (attempt % 10 === 0 || !opts.untilSent)
          this.logger.error(`could not publish ${contract.subject} for ${record.containerId} (${attempt} tries): ${(e as Error).message}`);
        if (attempt >= 10 && !opts.untilSent) return;
        await sleep(backoffMs(attempt, EVENT_RETRY_BACKOFF));
      }
    }
  }

  /** One log line of a container: on the dashboard and on its log subject (tern logs). */
  line(t: Tracked, stream: 'stdout' | 'stderr', line: string, at: Date = new Date()): void {
    const id = t.record.containerId;
    this.ctx.state.appendLog(id, stream === 'stderr' ? `! ${line}` : line);
    this.messaging.emit(
      CONTAINER_LOG_LINE,
      {
        containerId: id,
        deploymentId: t.record.deploymentId,
        stream,
        line: line.length > MAX_LOG_LINE ? line.slice(0, MAX_LOG_LINE) : line,
        sequence: t.logSequence++,
        at: at.toISOString(),
      },
      [this.machineId, t.record.deploymentId, id],
    );
  }

  /** The container's last output lines, as its failure event carries them. */
  lastLines(id: string): string[] {
    return this.ctx.state
      .containerLog(id)
      .slice(-CRASH_LOG_LINES)
      .map((l) => (l.length > CRASH_LOG_LINE_CHARS ? l.slice(0, CRASH_LOG_LINE_CHARS) : l));
  }

  /** What a stop's commit overwrote or left out, in the container's own log (`tern logs`), where its owner looks. */
  stopCommits(t: Tracked, reports: Record<string, VolumeCommitAnswer>): void {
    for (const [volume, report] of Object.entries(reports)) {
      const said = [
        ...(report.overwritten.length
          ? [`overwrote files others changed since this container's base: ${report.overwritten.join(', ')}`]
          : []),
        ...(report.skipped.length ? [`left out ${report.skipped.join('; ')}`] : []),
      ];
      if (said.length) this.line(t, 'stderr', `tern: commit of volume ${volume} on stop ${said.join('; ')}`);
    }
  }
}
