import { IsBoolean, IsIn, IsInt, IsOptional, IsString, Max, Min } from 'class-validator';
import { defineContract } from '../contract.js';
import { IsId } from '../validation.js';

/** What a tunnel reaches inside the sandbox: a TCP port it listens on, or a shell on a pty. */
export const TUNNEL_TARGETS = ['port', 'shell'] as const;
export type TunnelTarget = (typeof TUNNEL_TARGETS)[number];

/** NATS headers of a tunnel's data messages (see SANDBOX_TUNNEL_OPEN). */
export const TUNNEL_HEADERS = {
  /** The sender has no more bytes; the receiver closes the tunnel once its socket has said its last. */
  end: 'Tern-Tunnel-End',
  /** Sent while the tunnel is open and quiet, so each side notices the other is gone. */
  keepalive: 'Tern-Keepalive',
} as const;

export class TunnelOpen {
  @IsId() sandboxId!: string;
  /** Names the two data subjects of this tunnel; chosen at random by the gateway. */
  @IsId() tunnelId!: string;
  @IsIn(TUNNEL_TARGETS) target!: TunnelTarget;
  /** target port: the sandbox's port to connect to. */
  @IsOptional() @IsInt() @Min(1) @Max(65535) port?: number;
  /** target shell: the terminal's size. */
  @IsOptional() @IsInt() @Min(1) @Max(1000) cols?: number;
  @IsOptional() @IsInt() @Min(1) @Max(1000) rows?: number;
}

/**
 * A shell's new terminal size: the text message `{"resize":{"cols":N,"rows":M}}` on the shell's
 * WebSocket, carried to the agent as `POST /shells/<tunnelId>/resize` on SANDBOX_CALL.
 */
export class ShellResize {
  @IsInt({ message: 'cols must be a whole number' }) @Min(1) @Max(1000) cols!: number;
  @IsInt({ message: 'rows must be a whole number' }) @Min(1) @Max(1000) rows!: number;
}

export class TunnelOpenReply {
  @IsBoolean() opened!: boolean;
  @IsOptional() @IsString() reason?: string;
}

/**
 * A tunnel message carries no JSON: its data is the bytes (at most 64 KiB). These are its NATS
 * headers, as INVOKE's head travels in one (`Tern-Tunnel-End`, `Tern-Keepalive`).
 */
export class TunnelBytes {
  /** `Tern-Tunnel-End: 1` on the sender's last message. */
  @IsOptional() @IsIn(['1']) end?: '1';
  /** `Tern-Keepalive: 1` on an empty message that only says the sender is still there. */
  @IsOptional() @IsIn(['1']) keepalive?: '1';
}

export const SANDBOX_TUNNEL_OPEN = defineContract({
  subject: 'tern.agent.*.sandbox.tunnel.v1',
  kind: 'request',
  payload: TunnelOpen,
  reply: TunnelOpenReply,
  description: [
    "Open a byte stream to a sandbox: a TCP connection to one of its ports (a WebSocket or any upgraded request through `/sandbox/<id>/<port>/…`) or a shell on a pty (`tern sandbox shell`). Token: machine id. Sent by the gateway once it checked the caller's workspace owns the sandbox (and, for a port, that it is exposed); answered by that machine's agent once the connection or the shell is up (`opened: false` with the reason otherwise). The machine needs no inbound port.",
    'The bytes then flow on two subjects named by the tunnel id: gateway → agent on tern.agent.<machine>.sandbox.tunnel-in.<tunnelId>.v1, agent → gateway on tern.agent.<machine>.sandbox.tunnel-out.<tunnelId>.v1 (a machine publishes only under its own id). Each side subscribes its own subject before the open is sent or answered, so no byte is lost; messages carry at most 64 KiB, in order; `Tern-Tunnel-End: 1` says the sender has no more bytes (the receiver ends the input of its socket, and closes the tunnel once that socket closes, within 5 s); `Tern-Keepalive: 1` every 5 s, and a side that hears nothing for 20 s closes its end.',
  ].join('\n\n'),
});

export const SANDBOX_TUNNEL_IN = defineContract({
  subject: 'tern.agent.*.sandbox.tunnel-in.*.v1',
  kind: 'event',
  payload: TunnelBytes,
  description:
    "A tunnel's bytes towards the sandbox (see tern.agent.*.sandbox.tunnel.v1). Tokens: machine id, tunnel id. Sent by the gateway; heard by that machine's agent only. Raw bytes, not JSON.",
});

export const SANDBOX_TUNNEL_OUT = defineContract({
  subject: 'tern.agent.*.sandbox.tunnel-out.*.v1',
  kind: 'event',
  payload: TunnelBytes,
  description:
    "A tunnel's bytes from the sandbox (see tern.agent.*.sandbox.tunnel.v1). Tokens: machine id (the publisher's own), tunnel id. Sent by the agent; heard by the gateway that opened the tunnel. Raw bytes, not JSON.",
});
