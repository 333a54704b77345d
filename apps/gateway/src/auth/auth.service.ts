import { Inject, Injectable, Logger, type OnApplicationBootstrap, UnauthorizedException } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { API_TOKEN_PREFIX } from '#tern/contracts';
import { type ApiTokenRole, hashToken, TokensRepository } from '#tern/persistence';
import { fireAndForget } from '#tern/timing';
import { type Principal } from './principal.js';

export const DEFAULT_WORKSPACE = 'default';

/** How long a verified token is trusted without asking the database again. */
const VERIFIED_TTL_MS = 10_000;

/** A fresh API token: `tern_` and 43 url-safe characters (256 random bits). */
export function generateToken(): string {
  return `${API_TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
}

@Injectable()
export class AuthService implements OnApplicationBootstrap {
  private readonly logger = new Logger('auth');
  private readonly verified = new Map<string, { principal: Principal; until: number }>();
  private readonly looking = new Map<string, Promise<Principal | undefined>>();

  constructor(
    private readonly tokens: TokensRepository,
    @Inject(TERN_CONFIG) private readonly config: TernConfig,
  ) {}

  /**
   * The caller of a request with this `Authorization` header; a 401 that says what to send
   * otherwise. ApiTokenGuard and the routes served outside Nest (endpoints) both ask here.
   */
  async authenticate(header: string | undefined): Promise<Principal> {
    if (!header) {
      throw new UnauthorizedException('missing token: send "Authorization: Bearer <token>" (the operator token is printed by npm run up)');
    }
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!match) throw new UnauthorizedException('malformed Authorization header: expected "Bearer <token>"');
    const principal = await this.verify(match[1]!);
    if (!principal) throw new UnauthorizedException('invalid or revoked token');
    return principal;
  }

  /**
   * Every request is authenticated, so a verified token is remembered for VERIFIED_TTL_MS:
   * without it each endpoint call paid a database round trip (and a write). Revoking through
   * this gateway forgets at once; another gateway replica stops accepting within the TTL. An
   * expiring token is remembered no longer than it lives, and refused after with a 401 that
   * says it expired.
   */
  async verify(token: string): Promise<Principal | undefined> {
    const hash = hashToken(token);
    const cached = this.verified.get(hash);
    if (cached && cached.until > Date.now()) return cached.principal;
    // Under load a token's entry expires with many of its requests in flight: one lookup for all.
    let lookup = this.looking.get(hash);
    if (!lookup) {
      lookup = this.lookUp(hash).finally(() => this.looking.delete(hash));
      this.looking.set(hash, lookup);
    }
    return lookup;
  }

  private async lookUp(hash: string): Promise<Principal | undefined> {
    const row = await this.tokens.findActiveByHash(hash);
    // A deleted workspace's tokens are revoked with it; the check also covers one issued while it was being deleted.
    if (!row || !row.workspace || row.workspace.deletedAt) {
      this.verified.delete(hash);
      return undefined;
    }
    if (row.expiresAt && row.expiresAt.getTime() <= Date.now()) {
      this.verified.delete(hash);
      throw new UnauthorizedException(
        `token expired at ${row.expiresAt.toISOString()}: ask a workspace admin for a new one (tern token create)`,
      );
    }
    // Best effort, off the request path and at most once a TTL: a lost update of last_used_at is harmless.
    fireAndForget(`recording the use of token ${row.id}`, this.logger, this.tokens.markUsed(row.id));
    const principal: Principal = { workspaceId: row.workspaceId, workspaceName: row.workspace.name, tokenId: row.id, role: row.role };
    if (this.verified.size > 10_000) this.verified.clear();
    const until = Math.min(Date.now() + VERIFIED_TTL_MS, row.expiresAt?.getTime() ?? Infinity);
    this.verified.set(hash, { principal, until });
    return principal;
  }

  /** Forgets verified tokens of a revoked id at once (this replica). */
  forget(tokenId: string): void {
    for (const [hash, entry] of this.verified) if (entry.principal.tokenId === tokenId) this.verified.delete(hash);
  }

  /** Stores a new token for a workspace; the secret is returned once and only its hash is kept. */
  async issue(workspaceId: string, name: string, role: ApiTokenRole, expiresAt: Date | null = null, secret = generateToken()) {
    const row = await this.tokens.issue({ workspaceId, name, role, expiresAt, tokenHash: hashToken(secret), prefix: secret.slice(0, 8) });
    return { token: secret, row };
  }

  /**
   * With BOOTSTRAP_ADMIN_TOKEN set, make sure the default workspace exists and accepts that
   * token as the platform operator (the only way to a first operator token; the variable keeps
   * its historical name). Idempotent and safe with several gateways starting at once.
   */
  async onApplicationBootstrap() {
    const secret = this.config.bootstrapAdminToken;
    if (!secret) return;
    const installed = await this.tokens.ensureWorkspaceToken(DEFAULT_WORKSPACE, {
      name: 'operator (bootstrap)',
      role: 'operator',
      tokenHash: hashToken(secret),
      prefix: secret.slice(0, 8),
    });
    if (installed) this.logger.log(`bootstrap operator token installed in workspace "${DEFAULT_WORKSPACE}"`);
  }
}
