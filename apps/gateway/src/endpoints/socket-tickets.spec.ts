import type { TernConfig } from '#tern/config';
import type { ApiToken, TokensRepository } from '#tern/persistence';
import { readTicket, signTicket, SocketTickets, ticketOf, withoutTicket } from './socket-tickets.js';

const TOKEN_ID = '0b6a3f0e-8a8f-4a55-9c1e-2f1e3c4d5e6f';
const token = { id: TOKEN_ID, workspaceId: 'w1', workspace: { name: 'acme' }, role: 'member', tokenHash: 'h'.repeat(64), expiresAt: null };

/** SocketTickets over an in-memory token table: the one row above, or none once revoked. */
function tickets(rows: Partial<ApiToken>[] = [token as Partial<ApiToken>], secretsKey?: string) {
  const repo = { findActiveById: (id: string) => Promise.resolve((rows.find((r) => r.id === id) as ApiToken) ?? null) };
  return new SocketTickets(repo as unknown as TokensRepository, { secretsKey } as TernConfig);
}
const principal = { workspaceId: 'w1', workspaceName: 'acme', tokenId: TOKEN_ID, role: 'member' as const };

describe('socket tickets', () => {
  it('stand for their token, for one deployment, until they expire', async () => {
    const t = tickets();
    const { ticket, expiresAt } = await t.issue(principal, 'chat');
    expect(Date.parse(expiresAt) - Date.now()).toBeLessThanOrEqual(60_000);
    await expect(t.verify(ticket, 'chat')).resolves.toEqual(principal);
    await expect(t.verify(ticket, 'other')).rejects.toThrow('the ticket is for deployment "chat", not "other"');
    const old = signTicket({ t: TOKEN_ID, d: 'chat', e: Math.floor(Date.now() / 1000) - 1 }, token.tokenHash);
    await expect(t.verify(old, 'chat')).rejects.toThrow(/ticket expired/);
  });

  it('refuse a forged or altered ticket, one signed with another key, and one whose token was revoked', async () => {
    const t = tickets();
    const { ticket } = await t.issue(principal, 'chat');
    const [body, mac] = ticket.split('.');
    const claims = JSON.parse(Buffer.from(body, 'base64url').toString()) as { e: number };
    const longer = Buffer.from(JSON.stringify({ ...claims, e: claims.e + 3600 })).toString('base64url');
    await expect(t.verify(`${longer}.${mac}`, 'chat')).rejects.toThrow('invalid ticket');
    await expect(t.verify(signTicket({ t: TOKEN_ID, d: 'chat', e: claims.e }, 'guessed'), 'chat')).rejects.toThrow('invalid ticket');
    // With SECRETS_KEY the database's hash alone signs nothing.
    await expect(tickets(undefined, 'k'.repeat(44)).verify(ticket, 'chat')).rejects.toThrow('invalid ticket');
    await expect(tickets([]).verify(ticket, 'chat')).rejects.toThrow('invalid ticket');
    await expect(t.verify('not-a-ticket', 'chat')).rejects.toThrow('malformed ticket');
    expect(readTicket(`${Buffer.from('{"t":"x; DROP","d":"a","e":1}').toString('base64url')}.AA`)).toBeUndefined();
  });

  it('are read from the query or a subprotocol, and taken out of the URL the server and the logs see', () => {
    expect(ticketOf('/endpoint/a/ws?x=1&tern_ticket=abc.def', undefined)).toBe('abc.def');
    expect(ticketOf('/endpoint/a/ws', 'chat, tern.ticket.abc.def')).toBe('abc.def');
    expect(ticketOf('/endpoint/a/ws', 'chat')).toBeUndefined();
    expect(withoutTicket('/ws?x=1&tern_ticket=abc.def&y=2')).toBe('/ws?x=1&y=2');
    expect(withoutTicket('/ws?tern_ticket=abc.def')).toBe('/ws');
    expect(withoutTicket('/ws?x=1')).toBe('/ws?x=1');
  });
});
