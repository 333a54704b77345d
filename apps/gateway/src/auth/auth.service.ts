import { Inject, Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { randomBytes } from 'node:crypto';
import { DataSource, IsNull, Repository } from 'typeorm';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { ApiToken, type ApiTokenRole, hashToken, Workspace } from '#tern/persistence';
import { type Principal } from './principal.js';

export const DEFAULT_WORKSPACE = 'default';

/** How long a verified token is trusted without asking the database again. */
const VERIFIED_TTL_MS = 10_000;

/** A fresh API token: `tern_` and 43 url-safe characters (256 random bits). */
export function generateToken(): string {
  return `tern_${randomBytes(32).toString('base64url')}`;
}

@Injectable()
export class AuthService implements OnApplicationBootstrap {
  private readonly logger = new Logger('auth');
  private readonly verified = new Map<string, { principal: Principal; until: number }>();

  constructor(
    @InjectRepository(ApiToken) private readonly tokens: Repository<ApiToken>,
    private readonly dataSource: DataSource,
    @Inject(TERN_CONFIG) private readonly config: TernConfig,
  ) {}

  /**
   * Every request is authenticated, so a verified token is remembered for VERIFIED_TTL_MS:
   * without it each endpoint call paid a database round trip (and a write). Revoking through
   * this gateway forgets at once; another gateway replica stops accepting within the TTL.
   */
  async verify(token: string): Promise<Principal | undefined> {
    const hash = hashToken(token);
    const cached = this.verified.get(hash);
    if (cached && cached.until > Date.now()) return cached.principal;
    const row = await this.tokens.findOne({
      where: { tokenHash: hash, revokedAt: IsNull() },
      relations: { workspace: true },
    });
    if (!row || !row.workspace) {
      this.verified.delete(hash);
      return undefined;
    }
    // Best effort, off the request path and at most once a TTL: a lost update of last_used_at is harmless.
    void this.tokens.update(row.id, { lastUsedAt: new Date() }).catch(() => undefined);
    const principal: Principal = { workspaceId: row.workspaceId, workspaceName: row.workspace.name, tokenId: row.id, role: row.role };
    if (this.verified.size > 10_000) this.verified.clear();
    this.verified.set(hash, { principal, until: Date.now() + VERIFIED_TTL_MS });
    return principal;
  }

  /** Forgets verified tokens of a revoked id at once (this replica). */
  forget(tokenId: string): void {
    for (const [hash, entry] of this.verified) if (entry.principal.tokenId === tokenId) this.verified.delete(hash);
  }

  /** Stores a new token for a workspace; the secret is returned once and only its hash is kept. */
  async issue(workspaceId: string, name: string, role: ApiTokenRole, secret = generateToken()) {
    const row = await this.tokens.save(
      this.tokens.create({ workspaceId, name, role, tokenHash: hashToken(secret), prefix: secret.slice(0, 8) }),
    );
    return { token: secret, row };
  }

  /**
   * With BOOTSTRAP_ADMIN_TOKEN set, make sure the default workspace exists and accepts that
   * token as admin. Idempotent and safe with several gateways starting at once.
   */
  async onApplicationBootstrap() {
    const secret = this.config.bootstrapAdminToken;
    if (!secret) return;
    await this.dataSource.transaction(async (m) => {
      await m
        .createQueryBuilder()
        .insert()
        .into(Workspace)
        .values({ name: DEFAULT_WORKSPACE })
        .orIgnore()
        .execute();
      const workspace = await m.findOneByOrFail(Workspace, { name: DEFAULT_WORKSPACE });
      const inserted = await m
        .createQueryBuilder()
        .insert()
        .into(ApiToken)
        .values({ workspaceId: workspace.id, name: 'admin (bootstrap)', role: 'admin', tokenHash: hashToken(secret), prefix: secret.slice(0, 8) })
        .orIgnore()
        .execute();
      if (inserted.identifiers.filter(Boolean).length) this.logger.log(`bootstrap admin token installed for workspace "${DEFAULT_WORKSPACE}"`);
    });
  }
}
