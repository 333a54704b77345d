import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { Injectable, Logger } from '@nestjs/common';
import { CONTAINER_TUNNEL_OPEN, type DeploymentRecord } from '#tern/contracts';
import { Messaging, RequestError, TunnelEnd } from '#tern/messaging';
import { ApiError } from '#tern/service';
import { AuthService } from '../auth/auth.service.js';
import type { Principal } from '../auth/principal.js';
import { serveUpgrade, upgradeHead } from '../upgrades.js';
import { ENDPOINT_PREFIX, parseEndpointUrl, pinnedVersion, type EndpointTarget, VERSION_HEADER } from './endpoint-path.js';
import type { Lane } from './lane.js';
import { LanesService } from './lanes.service.js';
import { RoutesMirror, TABLE_NOT_LOADED } from './routes-mirror.js';
import { SocketTickets, TICKET_PROTOCOL_PREFIX, ticketOf, withoutTicket } from './socket-tickets.js';

/** How long an agent may take to connect to the container's port. */
const OPEN_TIMEOUT_MS = 10_000;

/**
 * WebSockets (any upgraded request) to endpoints: `/endpoint/<name>[@<N>]/…` as for HTTP, the
 * caller's token as `Authorization: Bearer`, or a ticket (SocketTickets) in the query or a
 * subprotocol where a browser can send no header. The socket holds one of a container's request
 * slots while it is open (so the container is neither overfilled nor scaled away under it), and
 * its bytes travel to the container's port in a tunnel over NATS, as a sandbox port's do.
 */
@Injectable()
export class EndpointSockets {
  private readonly logger = new Logger('endpoint-sockets');

  constructor(
    private readonly auth: AuthService,
    private readonly tickets: SocketTickets,
    private readonly table: RoutesMirror,
    private readonly lanes: LanesService,
    private readonly messaging: Messaging,
  ) {}

  /** Whether `url` is an endpoint's: the HTTP server's `upgrade` listener answers those here. */
  static handles(url: string | undefined): boolean {
    return (url ?? '').startsWith(ENDPOINT_PREFIX);
  }

  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    // The ticket never reaches a log line.
    const where = withoutTicket(req.url ?? '/').split('?')[0];
    serveUpgrade(this.logger, `WebSocket to ${where}`, socket, () => this.serve(req, socket, head), 'the WebSocket could not be opened');
  }

  private async serve(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    const target = parseEndpointUrl(req.url ?? '/');
    if (!target) throw new ApiError(404, 'expected /endpoint/<name>[@<version>][/<path>]');
    const principal = await this.principal(req, target.name);
    const record = await this.record(principal, target, req.headers[VERSION_HEADER]);
    const requestHead = this.head(req, target);
    const lane = this.lanes.lane(record.deploymentId, record.version);
    const closed = new AbortController();
    socket.once('close', () => closed.abort());
    const containerId = await this.takeContainer(lane, record, closed.signal);
    try {
      const end = await this.open(lane, containerId);
      socket.unshift(Buffer.concat([Buffer.from(requestHead), head]));
      await end.attach(socket);
    } finally {
      lane.release(containerId);
    }
  }

  private async principal(req: IncomingMessage, name: string): Promise<Principal> {
    if (req.headers.authorization) return this.auth.authenticate(req.headers.authorization);
    const ticket = ticketOf(req.url ?? '/', req.headers['sec-websocket-protocol']);
    if (!ticket)
      throw new ApiError(
        401,
        `send "Authorization: Bearer <token>", or (from a browser) a ticket from POST /api/v1/deployments/${name}/socket-tickets as ?tern_ticket=<ticket> or the subprotocol ${TICKET_PROTOCOL_PREFIX}<ticket>`,
      );
    return this.tickets.verify(ticket, name);
  }

  private async record(principal: Principal, target: EndpointTarget, header: string | string[] | undefined): Promise<DeploymentRecord> {
    const pin = pinnedVersion(target, header);
    if ('problem' in pin) throw new ApiError(400, pin.problem);
    if (!(await this.table.ready())) throw new ApiError(503, TABLE_NOT_LOADED);
    const found = this.table.find(principal.workspaceId, target.name, pin.version);
    if (!found.known) throw new ApiError(404, `deployment "${target.name}" not found`);
    const record = found.record;
    if (!record) throw new ApiError(404, `deployment "${target.name}" has no version ${pin.version}`);
    if (record.spec.kind !== 'endpoint')
      throw new ApiError(400, `deployment "${target.name}" is a ${record.spec.kind}: WebSockets reach endpoints only`);
    if (record.state === 'stopped') throw new ApiError(503, `deployment "${target.name}" stopped: start it to serve requests`);
    return record;
  }

  /** A slot of a ready container, waiting (and asking for a scale-from-zero) up to the spec's timeout as a request does. */
  private async takeContainer(lane: Lane, record: DeploymentRecord, signal: AbortSignal): Promise<string> {
    const queued = lane.buffered;
    const outcome = lane.acquire(record.spec.timeoutSeconds * 1000, signal);
    if (outcome === 'full')
      throw new ApiError(429, `buffer full: ${lane.buffered} requests already wait for "${record.name}" v${record.version}`);
    if (lane.buffered > queued) this.lanes.askForCapacity(lane);
    const result = await outcome;
    if ('containerId' in result) return result.containerId;
    if (result.error === 'aborted') throw new ApiError(499, 'the client closed the connection');
    throw new ApiError(
      504,
      `no container of "${record.name}" v${record.version} could take the WebSocket within ${record.spec.timeoutSeconds} s`,
    );
  }

  /** Asks the container's agent to connect to its port; its end here subscribed first, so no byte is missed. */
  private async open(lane: Lane, containerId: string): Promise<TunnelEnd> {
    const machineId = lane.machineOf(containerId);
    if (!machineId) throw new ApiError(503, `container ${containerId} is no longer routed; retry shortly`);
    const tunnelId = randomUUID().replace(/-/g, '');
    const end = new TunnelEnd(this.messaging, 'gateway', machineId, tunnelId);
    try {
      const reply = await this.messaging.request(
        CONTAINER_TUNNEL_OPEN,
        { containerId, tunnelId },
        { tokens: [machineId], timeoutMs: OPEN_TIMEOUT_MS },
      );
      if (!reply.opened) throw new ApiError(502, reply.reason ?? 'the container refused the WebSocket');
      return end;
    } catch (e) {
      end.close();
      if (e instanceof RequestError)
        throw new ApiError(502, `the agent of container ${containerId} does not answer (machine ${machineId}): ${e.message}`);
      throw e;
    }
  }

  /**
   * The upgrade request as the container receives it: its own path, without Tern's credential (the
   * token, the ticket in the query or among the subprotocols) or version pin. A browser that sent
   * its ticket as the only subprotocol must get one back, which the server cannot know to give.
   */
  private head(req: IncomingMessage, target: EndpointTarget): string {
    return upgradeHead(req, withoutTicket(target.path), (name, value) => {
      const lower = name.toLowerCase();
      if (lower === 'authorization' || lower === VERSION_HEADER) return undefined;
      if (lower !== 'sec-websocket-protocol') return value;
      const kept = value
        .split(',')
        .map((p) => p.trim())
        .filter((p) => p && !p.startsWith(TICKET_PROTOCOL_PREFIX));
      if (!kept.length)
        throw new ApiError(
          400,
          `offer your server's own subprotocol beside ${TICKET_PROTOCOL_PREFIX}<ticket>, or send the ticket as ?tern_ticket=<ticket>`,
        );
      return kept.join(', ');
    });
  }
}
