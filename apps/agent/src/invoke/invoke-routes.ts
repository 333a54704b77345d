import { Inject, Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import type { Subscription } from '@nats-io/transport-node';
import { AGENT_BODIES_PATH } from '#tern/contracts';
import { type BodyFetcher, Messaging, serveInvoke } from '#tern/messaging';
import { AGENT_CONTEXT, type AgentContext } from '../agent-context.js';
import { callGateway, refusalOf } from '../gateway-data.js';
import { containerForwarder, type ContainerEndpoint, type ContainerForwarder } from './forward.js';

/**
 * The invoke subjects this agent serves: `tern.agent.<machineId>.invoke.<containerId>.v1` for each of its ready
 * containers, forwarded to the container's $PORT on loopback. Subscribed when a container
 * passes its health check, unsubscribed when it stops, so a request for a container that is
 * gone finds no listener (the gateway's 503) rather than a dead port.
 */
@Injectable()
export class InvokeRoutes implements OnApplicationShutdown {
  private readonly logger = new Logger('invoke');
  private readonly subs = new Map<string, { sub: Subscription; forwarder: ContainerForwarder; endpoint: ContainerEndpoint }>();

  constructor(
    @Inject(Messaging) private readonly messaging: Messaging,
    @Inject(AGENT_CONTEXT) private readonly ctx: AgentContext,
  ) {}

  /** A large request body, from the gateway (which serves it once, to this machine only). */
  readonly fetchBody: BodyFetcher = async (requestId) => {
    const { gatewayUrl, token } = this.ctx.settings;
    const response = await callGateway({ gatewayUrl, token }, `${AGENT_BODIES_PATH}/${encodeURIComponent(requestId)}`, 60_000);
    if (response.status === 404) return null;
    if (!response.ok) throw new Error(`the gateway answered ${await refusalOf(response)}`);
    return new Uint8Array(await response.arrayBuffer());
  };

  /** `connections`: the requests the container takes at once (its workers × concurrency). */
  serve(containerId: string, endpoint: ContainerEndpoint, connections: number): void {
    if (this.subs.has(containerId)) return;
    const forwarder = containerForwarder(endpoint, connections);
    const sub = serveInvoke(this.messaging, { machineId: this.ctx.registration.machineId, containerId }, forwarder.handler, this.fetchBody);
    this.subs.set(containerId, { sub, forwarder, endpoint });
    this.logger.log({ containerId, ...endpoint }, `serving invokes for ${containerId} (${endpoint.host}:${endpoint.port})`);
  }

  drop(containerId: string): void {
    const served = this.subs.get(containerId);
    if (!served) return;
    this.subs.delete(containerId);
    served.sub.unsubscribe();
    served.forwarder.close().catch((e: Error) => this.logger.warn(`closing the connections to ${containerId}: ${e.message}`));
  }

  /** Where a container this agent serves invokes for listens; undefined for any other (not ready, stopped, not here). */
  endpointOf(containerId: string): ContainerEndpoint | undefined {
    return this.subs.get(containerId)?.endpoint;
  }

  serving(): string[] {
    return [...this.subs.keys()];
  }

  onApplicationShutdown() {
    for (const id of [...this.subs.keys()]) this.drop(id);
  }
}
