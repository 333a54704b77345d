import { type BeforeApplicationShutdown, Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { type NatsConnection } from '@nats-io/transport-node';
import { NATS_CONNECTION } from '#tern/messaging';
import { AGENT_CONTEXT, type AgentContext } from './agent-context.js';
import { fireAndForget } from '#tern/timing';

/**
 * The agent's view of its NATS connection: up or down, since when, and a hook for "back
 * after an outage of N ms". The connection itself reconnects forever (libs/messaging).
 */
@Injectable()
export class NatsLink implements OnModuleInit, BeforeApplicationShutdown {
  connected = true;
  private downSince?: number;
  private readonly listeners: ((outageMs: number) => void)[] = [];
  private closing = false;
  private readonly logger = new Logger('nats-link');

  constructor(
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
    @Inject(AGENT_CONTEXT) private readonly ctx: AgentContext,
  ) {}

  onModuleInit() {
    this.ctx.state.nats = { connected: true, server: this.nc.getServer() };
    fireAndForget('watching the NATS connection', this.logger, this.watch());
  }

  onReconnect(listener: (outageMs: number) => void) {
    this.listeners.push(listener);
  }

  private async watch() {
    for await (const s of this.nc.status()) {
      if (this.closing) break;
      if (s.type === 'disconnect' || s.type === 'staleConnection') {
        if (this.connected) this.downSince = Date.now();
        this.connected = false;
      } else if (s.type === 'reconnect') {
        const outage = this.downSince ? Date.now() - this.downSince : 0;
        this.connected = true;
        this.downSince = undefined;
        this.ctx.state.nats = { connected: true, server: this.nc.getServer() };
        for (const l of this.listeners) l(outage);
      }
      this.ctx.state.nats = { connected: this.connected, server: this.nc.getServer() };
    }
  }

  beforeApplicationShutdown() {
    this.closing = true;
  }
}
