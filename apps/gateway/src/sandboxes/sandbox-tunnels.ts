import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { HttpException, Injectable, Logger, NotFoundException, UnauthorizedException } from '@nestjs/common';
import { type WebSocket, WebSocketServer } from 'ws';
import { Duplex } from 'node:stream';
import { SANDBOX_CALL, SANDBOX_TUNNEL_OPEN, type ShellResize, type TunnelOpen } from '#tern/contracts';
import { invoke, InvokeError, Messaging, RequestError, TunnelEnd } from '#tern/messaging';
import type { Sandbox } from '#tern/persistence';
import { fireAndForget } from '#tern/timing';
import { AuthService } from '../auth/auth.service.js';
import type { Principal } from '../auth/principal.js';
import { EndpointSockets } from '../endpoints/endpoint-sockets.js';
import { serveUpgrade, upgradeHead } from '../upgrades.js';
import { SandboxesService } from './sandboxes.service.js';
import { shellMessage } from './shell-messages.js';

/** How long an agent may take to open a tunnel (connect to the port, start the shell). */
const OPEN_TIMEOUT_MS = 10_000;
/** How long the agent may take to resize a shell's pty. */
const RESIZE_TIMEOUT_MS = 10_000;

const SHELL_URL = /^\/api\/v1\/sandboxes\/([^/?]+)\/shell(?:\?(.*))?$/;
const PORT_URL = /^\/sandbox\/([^/?]+)\/([^/?]+)(.*)$/;
const PUBLIC_PORT_URL = /^\/sandbox-public\/([^/?]+)(.*)$/;

/**
 * A shell's WebSocket as a byte stream: binary messages are the terminal's bytes both ways; the
 * text message `{"eof":true}` ends the input (the CLI's stdin ended), so the shell reads EOF, and
 * `{"resize":{"cols":N,"rows":M}}` resizes its pty. Messages are taken in order: keys sent after
 * a resize reach the shell once its pty has the new size.
 */
function terminalStream(ws: WebSocket, resize: (size: ShellResize) => Promise<void>): Duplex {
  let ended = false;
  const endInput = () => {
    if (!ended) duplex.push(null);
    ended = true;
  };
  const duplex = new Duplex({
    write: (chunk: Buffer, _encoding, done) => ws.send(chunk, done),
    final: (done) => {
      ws.close(1000);
      done();
    },
    destroy: (error, done) => {
      ws.close(1000);
      done(error);
    },
    read: () => undefined,
  });
  let inOrder = Promise.resolve();
  ws.on('message', (data: Buffer, binary) => {
    inOrder = inOrder.then(async () => {
      if (ended) return;
      if (binary) return void duplex.push(data);
      const message = shellMessage(data.toString('utf8'));
      if (message && 'eof' in message) endInput();
      else if (message) await resize(message.resize);
    });
  });
  ws.on('close', () => {
    inOrder = inOrder.then(endInput);
  });
  ws.on('error', () => duplex.destroy());
  return duplex;
}

/**
 * Upgraded requests (WebSockets) into sandboxes: to an exposed port (`/sandbox/<id>/<port>/…`
 * with the workspace's token, `/sandbox-public/<token>/…` without), passed on byte for byte, and
 * the shell (`/api/v1/sandboxes/<id>/shell`, a WebSocket this gateway answers). Either way the
 * bytes travel in a tunnel over NATS (SANDBOX_TUNNEL_OPEN): the machine needs no inbound port.
 */
@Injectable()
export class SandboxTunnels {
  private readonly logger = new Logger('sandbox-tunnels');
  private readonly shells = new WebSocketServer({ noServer: true, maxPayload: 1024 * 1024 });

  constructor(
    private readonly auth: AuthService,
    private readonly sandboxes: SandboxesService,
    private readonly messaging: Messaging,
  ) {}

  /** The HTTP server's `upgrade` listener. */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    if (EndpointSockets.handles(req.url)) return; // the endpoints module's listener answers those
    serveUpgrade(this.logger, `upgrade of ${req.url}`, socket, () => this.route(req, socket, head), 'the tunnel could not be opened');
  }

  private async route(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    const url = req.url ?? '/';
    const publicPort = PUBLIC_PORT_URL.exec(url);
    if (publicPort) {
      const { sandbox, port } = await this.sandboxes.publicPort(publicPort[1]);
      return this.toPort(sandbox, port, req, publicPort[2], socket, head);
    }
    const port = PORT_URL.exec(url);
    if (port) {
      const sandbox = await this.sandboxes.running(await this.principal(req), port[1]);
      if (!sandbox.ports.includes(Number(port[2]))) throw new NotFoundException(`port ${port[2]} of sandbox ${port[1]} is not exposed`);
      return this.toPort(sandbox, Number(port[2]), req, port[3], socket, head);
    }
    const shell = SHELL_URL.exec(url);
    if (shell) return this.toShell(await this.sandboxes.running(await this.principal(req), shell[1]), shell[2], req, socket, head);
    throw new NotFoundException(`no WebSocket at ${url.split('?')[0]}: sandbox ports, shells and endpoints only`);
  }

  private async principal(req: IncomingMessage): Promise<Principal> {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
    const principal = match ? await this.auth.verify(match[1]) : undefined;
    if (!principal) throw new UnauthorizedException('send "Authorization: Bearer <token>" with a valid token');
    return principal;
  }

  private async toPort(sandbox: Sandbox, port: number, req: IncomingMessage, path: string, socket: Duplex, head: Buffer) {
    const end = await this.open(sandbox, { target: 'port', port });
    // The server gets the caller's headers less Tern's credential.
    const requestHead = upgradeHead(req, path || '/', (name, value) => (name.toLowerCase() === 'authorization' ? undefined : value));
    socket.unshift(Buffer.concat([Buffer.from(requestHead), head]));
    await end.attach(socket);
  }

  private async toShell(sandbox: Sandbox, query: string | undefined, req: IncomingMessage, socket: Duplex, head: Buffer) {
    const size = new URLSearchParams(query ?? '');
    const dimension = (name: string) => {
      const n = Number(size.get(name));
      return Number.isInteger(n) && n >= 1 && n <= 1000 ? { [name]: n } : {};
    };
    const end = await this.open(sandbox, { target: 'shell', ...dimension('cols'), ...dimension('rows') });
    this.shells.handleUpgrade(req, socket, head, (ws) => {
      const resize = (size: ShellResize) => this.resizeShell(sandbox, end.tunnelId, size);
      fireAndForget(`shell of sandbox ${sandbox.id}`, this.logger, end.attach(terminalStream(ws, resize)));
    });
  }

  /** Asks the agent to resize the shell's pty (SANDBOX_CALL); one that fails leaves the old size, logged. */
  private async resizeShell(sandbox: Sandbox, tunnelId: string, size: ShellResize): Promise<void> {
    try {
      const response = await invoke(
        this.messaging,
        { machineId: sandbox.machineId!, containerId: sandbox.id },
        {
          requestId: randomUUID().replace(/-/g, ''),
          deploymentId: sandbox.id,
          method: 'POST',
          path: `/shells/${tunnelId}/resize`,
          headers: { 'content-type': 'application/json' },
          timeoutMs: RESIZE_TIMEOUT_MS,
        },
        Buffer.from(JSON.stringify(size)),
        { contract: SANDBOX_CALL },
      );
      for await (const _ of response.body); // the answer is only its status
      if (response.status !== 200) this.logger.warn(`shell ${tunnelId} of sandbox ${sandbox.id} not resized: status ${response.status}`);
    } catch (e) {
      if (!(e instanceof InvokeError)) throw e;
      this.logger.warn(`shell ${tunnelId} of sandbox ${sandbox.id} not resized: ${e.message}`);
    }
  }

  /** Asks the sandbox's agent to open a tunnel; its end here subscribed first, so no byte is missed. */
  private async open(sandbox: Sandbox, target: Omit<TunnelOpen, 'sandboxId' | 'tunnelId'>): Promise<TunnelEnd> {
    const tunnelId = randomUUID().replace(/-/g, '');
    const end = new TunnelEnd(this.messaging, 'gateway', sandbox.machineId!, tunnelId);
    try {
      const reply = await this.messaging.request(
        SANDBOX_TUNNEL_OPEN,
        { sandboxId: sandbox.id, tunnelId, ...target },
        { tokens: [sandbox.machineId!], timeoutMs: OPEN_TIMEOUT_MS },
      );
      if (!reply.opened) throw new HttpException(reply.reason ?? 'the sandbox refused the tunnel', 502);
      return end;
    } catch (e) {
      end.close();
      if (e instanceof RequestError)
        throw new HttpException(`the agent of sandbox ${sandbox.id} does not answer (machine ${sandbox.machineId}): ${e.message}`, 502);
      throw e;
    }
  }
}
