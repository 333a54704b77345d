import type { Duplex } from 'node:stream';
import { headers as natsHeaders, type Msg, type Subscription } from '@nats-io/transport-node';
import { SANDBOX_TUNNEL_IN, SANDBOX_TUNNEL_OUT, TUNNEL_HEADERS } from '#tern/contracts';
import type { Messaging } from './messaging.js';

/** Bytes per message: small enough to interleave many tunnels on one connection. */
const TUNNEL_CHUNK_BYTES = 64 * 1024;
const TUNNEL_KEEPALIVE_MS = 5_000;
/** A side that hears nothing (no bytes, no keepalive) for this long is taken for gone. */
const TUNNEL_SILENCE_MS = 20_000;
/** After the other side ended, how long the socket may take to flush and close before it is destroyed. */
const TUNNEL_LINGER_MS = 5_000;

export type TunnelSide = 'gateway' | 'agent';

/**
 * One end of a sandbox tunnel (SANDBOX_TUNNEL_OPEN): the gateway's holds the caller's socket,
 * the agent's the sandbox's port or shell. It subscribes to the bytes coming its way when made,
 * before the open is sent or answered, and keeps what arrives until a socket is attached; then
 * it carries the socket's bytes both ways until either side ends or the other falls silent.
 */
export class TunnelEnd {
  private readonly sub: Subscription;
  private readonly sendSubject: string;
  private readonly early: Msg[] = [];
  private socket?: Duplex;
  private heardAt = Date.now();
  private readonly timer: NodeJS.Timeout;
  private endSent = false;
  private closed = false;
  private finish!: () => void;
  /** Resolves once the tunnel is closed, whichever side closed it. */
  readonly done = new Promise<void>((resolve) => (this.finish = resolve));

  constructor(
    private readonly messaging: Messaging,
    side: TunnelSide,
    machineId: string,
    /** Names the tunnel's two subjects, and a shell's pty to resize. */
    readonly tunnelId: string,
  ) {
    const [inbound, outbound] = side === 'gateway' ? [SANDBOX_TUNNEL_OUT, SANDBOX_TUNNEL_IN] : [SANDBOX_TUNNEL_IN, SANDBOX_TUNNEL_OUT];
    this.sendSubject = messaging.subject(outbound, [machineId, tunnelId]);
    this.sub = messaging.nc.subscribe(messaging.subject(inbound, [machineId, tunnelId]), {
      callback: (err, msg) => (err ? this.close() : this.receive(msg)),
    });
    // Until a socket is attached the timer only watches for silence (an open never answered).
    this.timer = setInterval(() => this.tick(), TUNNEL_KEEPALIVE_MS);
  }

  /** Carries `socket`'s bytes both ways; resolves once the tunnel is closed. */
  attach(socket: Duplex): Promise<void> {
    this.socket = socket;
    socket.on('data', (chunk: Buffer) => {
      for (let at = 0; at < chunk.length; at += TUNNEL_CHUNK_BYTES)
        this.messaging.nc.publish(this.sendSubject, chunk.subarray(at, at + TUNNEL_CHUNK_BYTES));
    });
    socket.on('end', () => this.sendEnd());
    socket.on('error', () => socket.destroy());
    socket.on('close', () => this.close());
    for (const msg of this.early.splice(0)) this.receive(msg);
    return this.done;
  }

  /** Ends the tunnel from this side (a refused open, a shutdown): the other side hears the end. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.sendEnd();
    clearInterval(this.timer);
    this.sub.unsubscribe();
    this.socket?.destroy();
    this.finish();
  }

  private receive(msg: Msg): void {
    this.heardAt = Date.now();
    if (this.closed) return;
    if (!this.socket) {
      this.early.push(msg);
      return;
    }
    if (msg.headers?.get(TUNNEL_HEADERS.end)) {
      // The other side is done sending: what was written still flushes, and what the socket
      // still says (a shell's last words after its input ended) goes back, until it closes.
      this.socket.end();
      setTimeout(() => this.close(), TUNNEL_LINGER_MS).unref();
      return;
    }
    if (msg.headers?.get(TUNNEL_HEADERS.keepalive)) return;
    if (msg.data.length) this.socket.write(msg.data);
  }

  private tick(): void {
    if (Date.now() - this.heardAt > TUNNEL_SILENCE_MS) return this.close();
    this.signal(TUNNEL_HEADERS.keepalive);
  }

  private sendEnd(): void {
    if (this.endSent) return;
    this.endSent = true;
    this.signal(TUNNEL_HEADERS.end);
  }

  private signal(header: string): void {
    if (this.messaging.nc.isClosed()) return;
    const h = natsHeaders();
    h.set(header, '1');
    this.messaging.nc.publish(this.sendSubject, new Uint8Array(), { headers: h });
  }
}
