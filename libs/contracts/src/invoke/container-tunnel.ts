import { defineContract } from '../contract.js';
import { TunnelOpenReply } from '../sandbox/sandbox-tunnel.js';
import { IsId } from '../validation.js';

export class ContainerTunnelOpen {
  /** A ready endpoint container of this machine (one it serves invokes for). */
  @IsId() containerId!: string;
  /** Names the two data subjects of this tunnel; chosen at random by the gateway. */
  @IsId() tunnelId!: string;
}

export const CONTAINER_TUNNEL_OPEN = defineContract({
  subject: 'tern.agent.*.container.tunnel.v1',
  kind: 'request',
  payload: ContainerTunnelOpen,
  reply: TunnelOpenReply,
  description: [
    "Open a byte stream to an endpoint container's $PORT, for a WebSocket (or any upgraded request) through `/endpoint/<name>/…`. Token: machine id. Sent by the gateway once it checked the caller's workspace owns the deployment and took one of the container's request slots (held while the tunnel is open); answered by that machine's agent once the connection is up (`opened: false` with the reason otherwise: the container is not one it serves, or its port refused).",
    "The bytes then flow as a sandbox tunnel's do, on the same subjects (tern.agent.<machine>.sandbox.tunnel-in.<tunnelId>.v1 and …tunnel-out…), with the same end and keepalive headers (see tern.agent.*.sandbox.tunnel.v1).",
  ].join('\n\n'),
});
