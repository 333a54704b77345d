import { type BeforeApplicationShutdown, Inject, Injectable, Logger } from '@nestjs/common';
import { MACHINE_BEAT, type MachineHeartbeat } from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import { TERN_VERSION } from '#tern/config';
import { Ticker } from '#tern/timing';
import { AGENT_CONTEXT, type AgentContext } from '../agent-context.js';
import { ContainersService } from '../containers/containers.service.js';
import { NatsLink } from '../nats-link.js';
import { heartbeatsTotal } from '../metrics.js';
import { sampleLoad } from './load.js';

/**
 * A heartbeat every heartbeatIntervalSeconds, a core NATS publish (MACHINE_BEAT: stored nowhere,
 * no acknowledgement; its machine user may publish its own machine's subject only). While NATS is
 * down a beat is skipped (its sequence number still used, so the gap shows); a publish that fails
 * is logged once per outage, never fatal.
 */
@Injectable()
export class HeartbeatService implements BeforeApplicationShutdown {
  private readonly logger = new Logger('heartbeat');
  private sequence = 0;
  private ticker?: Ticker;
  private failing = false;

  constructor(
    private readonly messaging: Messaging,
    private readonly link: NatsLink,
    private readonly containers: ContainersService,
    @Inject(AGENT_CONTEXT) private readonly ctx: AgentContext,
  ) {}

  get intervalMs(): number {
    return this.ctx.registration.heartbeatIntervalSeconds * 1000;
  }

  /** The last sequence number used, so the registration watch can compare it with what the scheduler saw. */
  get lastSequence(): number {
    return this.sequence - 1;
  }

  start() {
    this.ctx.state.heartbeatIntervalSeconds = this.ctx.registration.heartbeatIntervalSeconds;
    this.logger.log(`heartbeats every ${this.ctx.registration.heartbeatIntervalSeconds} s`);
    // On a fixed period from the start, so a slow beat does not push every later one back.
    this.ticker = new Ticker({ name: 'heartbeat', everyMs: this.intervalMs, logger: this.logger, immediate: true }, () =>
      this.beat(),
    ).start();
  }

  async beat(): Promise<boolean> {
    const sequence = this.sequence++;
    const sentAt = new Date().toISOString();
    const { state, registration } = this.ctx;
    try {
      const load = await sampleLoad();
      state.cpuPercent = load.cpuPercent;
      state.memoryPercent = load.memoryPercent;
      if (!this.link.connected) {
        heartbeatsTotal.inc({ outcome: 'skipped' });
        return false;
      }
      const busy = this.containers.busyGpus();
      state.busyGpus = busy;
      const beat: MachineHeartbeat = {
        machineId: registration.machineId,
        pool: registration.pool,
        sentAt,
        sequence,
        cpuPercent: load.cpuPercent,
        memoryPercent: load.memoryPercent,
        gpus: state.gpus.map((g) => ({
          index: g.index,
          model: g.model,
          memoryMiB: g.memoryMiB,
          state: busy.has(`${g.vendor}:${g.index}`) ? 'busy' : 'free',
        })),
        runningContainers: this.containers.runningIds(),
        agentVersion: TERN_VERSION,
        ...(this.containers.isolation() ? { isolation: this.containers.isolation() } : {}),
        ...(this.ctx.settings.builder ? { builder: true } : {}),
        ...(this.ctx.settings.siteCache ? { siteCache: this.ctx.settings.siteCache } : {}),
      };
      this.messaging.emit(MACHINE_BEAT, beat, [registration.machineId]);
      state.lastHeartbeatAt = Date.now();
      heartbeatsTotal.inc({ outcome: 'sent' });
      if (this.failing) this.logger.log(`heartbeats flowing again (sequence ${sequence})`);
      this.failing = false;
      return true;
    } catch (e) {
      if (!this.failing) this.logger.warn(`heartbeat ${sequence} not delivered (${(e as Error).message}); will keep trying`);
      this.failing = true;
      heartbeatsTotal.inc({ outcome: 'failed' });
      return false;
    }
  }

  async beforeApplicationShutdown() {
    await this.ticker?.stop();
  }
}
