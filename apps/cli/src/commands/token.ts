import { Command, InvalidArgumentError } from 'commander';
import type { CreatedToken, CreateTokenRequest, TokenView } from '#tern/contracts';
import { ApiClient } from '../api-client.js';
import { resolveContext } from '../cli-config.js';
import { ago } from '../format.js';
import { table } from '../table.js';

function client() {
  return new ApiClient(resolveContext());
}

const UNIT_MS: Record<string, number> = { m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/**
 * `--expires`: a duration from now (`90m`, `12h`, `30d`, `8w`) or a date (`2027-01-31`,
 * `2027-01-31T12:00:00Z`), as the ISO moment the API takes.
 */
export function expiryFrom(value: string, now = Date.now()): string {
  const text = value.trim();
  const duration = /^(\d+)\s*([mhdw])$/i.exec(text);
  if (duration) {
    const ms = Number(duration[1]) * UNIT_MS[duration[2].toLowerCase()];
    if (ms <= 0) throw new InvalidArgumentError('must be a positive duration, e.g. 30d');
    return new Date(now + ms).toISOString();
  }
  const at = /^\d{4}-\d{2}-\d{2}/.test(text) ? Date.parse(text) : NaN;
  if (Number.isNaN(at)) {
    throw new InvalidArgumentError('must be a duration (90m, 12h, 30d, 8w) or a date (2027-01-31 or 2027-01-31T12:00:00Z)');
  }
  if (at <= now) throw new InvalidArgumentError(`${new Date(at).toISOString()} is not in the future`);
  return new Date(at).toISOString();
}

/** When a token stops working, as the list shows it. */
export function expiryText(expiresAt: string | null, now = Date.now()): string {
  if (!expiresAt) return 'never';
  return Date.parse(expiresAt) <= now ? `expired ${ago(expiresAt, now)}` : expiresAt;
}

export function renderTokens(tokens: TokenView[], now = Date.now()): string {
  return table(
    ['ID', 'NAME', 'ROLE', 'PREFIX', 'CREATED', 'LAST USED', 'EXPIRES'],
    tokens.map((t) => [t.id, t.name, t.role, t.prefix, t.createdAt, ago(t.lastUsedAt, now), expiryText(t.expiresAt, now)]),
  );
}

export function tokenCommand(): Command {
  const token = new Command('token').description("API tokens of the calling token's workspace: create, list, revoke");

  token
    .command('create')
    .description('Create a token (workspace admin token); the secret is printed once')
    .argument('<name>', 'a label to tell tokens apart')
    .option('--role <role>', 'member, admin, or operator (from an operator token only)', 'member')
    .option('--expires <when>', 'when it stops working: a duration from now (90m, 12h, 30d, 8w) or a date (2027-01-31)', (v) =>
      expiryFrom(v),
    )
    .option('--json', 'print the raw JSON')
    .action(async (name: string, opts: { role: string; expires?: string; json?: boolean }) => {
      const request: CreateTokenRequest = {
        name,
        role: opts.role as CreateTokenRequest['role'],
        ...(opts.expires ? { expiresAt: opts.expires } : {}),
      };
      const { body } = await client().request<CreatedToken>('POST', '/api/v1/tokens', request);
      console.log(
        opts.json
          ? JSON.stringify(body, null, 2)
          : `Token ${body.name} (${body.role}, expires ${expiryText(body.expiresAt)}) created; it is shown only now:\n\n  ${body.token}`,
      );
    });

  token
    .command('list')
    .description('Tokens not revoked, with their expiry (never their secrets)')
    .option('--json', 'print the raw JSON')
    .action(async (opts: { json?: boolean }) => {
      const { body } = await client().get<TokenView[]>('/api/v1/tokens');
      console.log(opts.json ? JSON.stringify(body, null, 2) : renderTokens(body));
    });

  token
    .command('revoke')
    .description('Revoke a token at once (workspace admin token)')
    .argument('<id>', 'token id (tern token list)')
    .action(async (id: string) => {
      await client().request('DELETE', `/api/v1/tokens/${encodeURIComponent(id)}`);
      console.log(`Token ${id} revoked.`);
    });

  return token;
}
