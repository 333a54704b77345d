import { Controller, Inject, Logger } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { CONTAINER_TUNNEL_OPEN, ContainerTunnelOpen, type TunnelOpenReply } from '#tern/contracts';
import { Messaging, OnRequest, TunnelEnd } from '#tern/messaging';
import { fireAndForget } from '#tern/timing';
import { AGENT_CONTEXT, type AgentContext } from '../agent-context.js';
import { connectToPort } from '../sandboxes/sandbox-tunnels.js';
import { InvokeRoutes } from './invoke-routes.js';

/**
 * WebSockets (any upgraded request) to this machine's endpoint containers: the gateway opens a
 * tunnel (CONTAINER_TUNNEL_OPEN) and its bytes reach the container's $PORT as a sandbox port's
 * do. Only a container this agent serves invokes for is reached: a ready one of an endpoint.
 */
@Controller()
export class ContainerTunnelsController {
  private readonly logger = new Logger('container-tunnels');

  constructor(
    @Inject(Messaging) private readonly messaging: Messaging,
    @Inject(AGENT_CONTEXT) private readonly ctx: AgentContext,
    private readonly routes: InvokeRoutes,
  ) {}

  @OnRequest(CONTAINER_TUNNEL_OPEN, { tokens: ['machineId'] })
  async open(@Payload() cmd: ContainerTunnelOpen): Promise<TunnelOpenReply> {
    const endpoint = this.routes.endpointOf(cmd.containerId);
    if (!endpoint) return { opened: false, reason: `container ${cmd.containerId} is not a ready endpoint container of this machine` };
    // Subscribed before the answer, so no byte the gateway sends after it is missed.
    const end = new TunnelEnd(this.messaging, 'agent', this.ctx.registration.machineId, cmd.tunnelId);
    try {
      const socket = await connectToPort(endpoint.host, endpoint.port);
      fireAndForget(`tunnel ${cmd.tunnelId} to container ${cmd.containerId}`, this.logger, end.attach(socket));
      return { opened: true };
    } catch (e) {
      end.close();
      return {
        opened: false,
        reason: `container ${cmd.containerId} refused a connection on its port ${endpoint.port}: ${(e as Error).message}`,
      };
    }
  }
}
