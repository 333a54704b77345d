import { createHmac, timingSafeEqual } from 'node:crypto';
import { Inject, Injectable, UnauthorizedException } from '@nestjs/common';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { TokensRepository } from '#tern/persistence';
import type { Principal } from '../auth/principal.js';

/** How long a ticket opens WebSockets: long enough for a page to connect, short enough that a leaked one is soon worthless. */
export const TICKET_TTL_SECONDS = 60;
/** The query parameter a browser puts a ticket in: `new WebSocket(".../endpoint/chat/ws?tern_ticket=...")`. */
export const TICKET_QUERY = 'tern_ticket';
/** The subprotocol prefix of the other browser form: `new WebSocket(url, ["tern.ticket." + ticket, "your-protocol"])`. */
export const TICKET_PROTOCOL_PREFIX = 'tern.ticket.';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** What a ticket says: the token it stands for, the deployment it opens, until when (epoch seconds). */
interface TicketClaims {
  t: string;
  d: string;
  e: number;
}

/**
 * The MAC's key is the ticket's own token's hash, peppered with SECRETS_KEY where the installation
 * has one: every gateway replica checks a ticket with no key of its own to share, revoking the
 * token voids its tickets at once, and (with SECRETS_KEY) a copy of the database forges none.
 */
function mac(claims: string, tokenHash: string, pepper: string): Buffer {
  const key = createHmac('sha256', pepper).update(tokenHash).digest();
  return createHmac('sha256', key).update(claims).digest();
}

export function signTicket(claims: TicketClaims, tokenHash: string, pepper = ''): string {
  const body = Buffer.from(JSON.stringify(claims)).toString('base64url');
  return `${body}.${mac(body, tokenHash, pepper).toString('base64url')}`;
}

/** The claims of a well-formed ticket, not yet checked against its token; undefined for anything else. */
export function readTicket(ticket: string): (TicketClaims & { body: string; mac: Buffer }) | undefined {
  const [body, sig, extra] = ticket.split('.');
  if (!body || !sig || extra !== undefined) return undefined;
  try {
    const claims = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as Partial<TicketClaims>;
    if (typeof claims.t !== 'string' || !UUID.test(claims.t) || typeof claims.d !== 'string' || !Number.isInteger(claims.e))
      return undefined;
    return { t: claims.t, d: claims.d, e: claims.e!, body, mac: Buffer.from(sig, 'base64url') };
  } catch {
    return undefined;
  }
}

/** A URL with its ticket taken out of the query: what the container receives, and what a log line may say. */
export function withoutTicket(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  const params = url
    .slice(q + 1)
    .split('&')
    .filter((p) => p !== '' && p.split('=')[0] !== TICKET_QUERY);
  return params.length ? `${url.slice(0, q)}?${params.join('&')}` : url.slice(0, q);
}

/** The ticket a browser sent: in the query, or as a subprotocol. */
export function ticketOf(url: string, protocols: string | undefined): string | undefined {
  const q = url.indexOf('?');
  const fromQuery = q >= 0 ? new URLSearchParams(url.slice(q + 1)).get(TICKET_QUERY) : null;
  if (fromQuery) return fromQuery;
  const offered = (protocols ?? '').split(',').map((p) => p.trim());
  return offered.find((p) => p.startsWith(TICKET_PROTOCOL_PREFIX))?.slice(TICKET_PROTOCOL_PREFIX.length);
}

/**
 * Short-lived tickets that open WebSockets to one deployment: a browser cannot set an
 * Authorization header on a WebSocket, and a long-lived token does not belong in a URL.
 */
@Injectable()
export class SocketTickets {
  private readonly pepper: string;

  constructor(
    private readonly tokens: TokensRepository,
    @Inject(TERN_CONFIG) config: TernConfig,
  ) {
    this.pepper = config.secretsKey ?? '';
  }

  async issue(principal: Principal, deployment: string): Promise<{ ticket: string; expiresAt: string }> {
    const token = await this.tokens.findActiveById(principal.tokenId);
    if (!token) throw new UnauthorizedException('the token was revoked');
    const e = Math.floor(Date.now() / 1000) + TICKET_TTL_SECONDS;
    return {
      ticket: signTicket({ t: token.id, d: deployment, e }, token.tokenHash, this.pepper),
      expiresAt: new Date(e * 1000).toISOString(),
    };
  }

  /** The principal a ticket stands for, when it is good for `deployment` now; a 401 saying why otherwise. */
  async verify(ticket: string, deployment: string): Promise<Principal> {
    const claims = readTicket(ticket);
    if (!claims) throw new UnauthorizedException(`malformed ticket: get one from POST /api/v1/deployments/${deployment}/socket-tickets`);
    if (claims.e * 1000 <= Date.now())
      throw new UnauthorizedException(`ticket expired: tickets last ${TICKET_TTL_SECONDS} s, get a new one just before connecting`);
    if (claims.d !== deployment) throw new UnauthorizedException(`the ticket is for deployment "${claims.d}", not "${deployment}"`);
    const token = await this.tokens.findActiveById(claims.t);
    const expected = token ? mac(claims.body, token.tokenHash, this.pepper) : undefined;
    if (!token?.workspace || !expected || expected.length !== claims.mac.length || !timingSafeEqual(expected, claims.mac))
      throw new UnauthorizedException('invalid ticket, or its token was revoked');
    if (token.expiresAt && token.expiresAt.getTime() <= Date.now())
      throw new UnauthorizedException(`the ticket's token expired at ${token.expiresAt.toISOString()}`);
    return { workspaceId: token.workspaceId, workspaceName: token.workspace.name, tokenId: token.id, role: token.role };
  }
}
