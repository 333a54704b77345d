import { TERN_CONFIG } from '#tern/config';
import { type ApiToken, hashToken, TokensRepository } from '#tern/persistence';
import { newTestService } from '../../../../test/support/test-service.js';
import { AuthService, DEFAULT_WORKSPACE } from './auth.service.js';

const SECRET = `tern_${'s'.repeat(43)}`;
const token = (over: Partial<ApiToken> = {}) =>
  ({
    id: 't1',
    workspaceId: 'w1',
    workspace: { name: 'team', deletedAt: null },
    role: 'member',
    expiresAt: null,
    ...over,
  }) as ApiToken;

async function auth(bootstrapAdminToken?: string) {
  const { sut, fake } = await newTestService(AuthService, [[TERN_CONFIG, { bootstrapAdminToken }]]);
  const tokens = fake(TokensRepository);
  tokens.findActiveByHash.mockImplementation(async (hash) => (hash === hashToken(SECRET) ? token() : null));
  return { sut, tokens };
}

describe('AuthService.authenticate', () => {
  it('answers the principal of a known token, looking it up once for concurrent requests and caching it', async () => {
    const { sut, tokens } = await auth();
    const [a, b] = await Promise.all([sut.authenticate(`Bearer ${SECRET}`), sut.authenticate(`bearer ${SECRET}`)]);
    expect(a).toEqual({ workspaceId: 'w1', workspaceName: 'team', tokenId: 't1', role: 'member' });
    expect(b).toEqual(a);
    await sut.authenticate(`Bearer ${SECRET}`);
    expect(tokens.findActiveByHash).toHaveBeenCalledTimes(1);
  });

  it('answers 401 saying what to send for a missing, malformed or unknown token', async () => {
    const { sut } = await auth();
    await expect(sut.authenticate(undefined)).rejects.toMatchObject({ status: 401, message: expect.stringMatching(/^missing token/) });
    await expect(sut.authenticate(`Token ${SECRET}`)).rejects.toMatchObject({ status: 401, message: expect.stringMatching(/^malformed/) });
    await expect(sut.authenticate('Bearer tern_other')).rejects.toMatchObject({ status: 401, message: 'invalid or revoked token' });
  });

  it('refuses a token of a deleted workspace, even one not revoked', async () => {
    const { sut, tokens } = await auth();
    tokens.findActiveByHash.mockResolvedValue(token({ workspace: { name: 'team', deletedAt: new Date() } as never }));
    await expect(sut.authenticate(`Bearer ${SECRET}`)).rejects.toMatchObject({ status: 401, message: 'invalid or revoked token' });
  });

  it('answers 401 saying an expired token expired and how to get another', async () => {
    const { sut, tokens } = await auth();
    tokens.findActiveByHash.mockResolvedValue(token({ expiresAt: new Date('2026-01-01T00:00:00Z') }));
    await expect(sut.authenticate(`Bearer ${SECRET}`)).rejects.toMatchObject({
      status: 401,
      message: 'token expired at 2026-01-01T00:00:00.000Z: ask a workspace admin for a new one (tern token create)',
    });
  });

  it('asks the database again at once for a token this replica revoked', async () => {
    const { sut, tokens } = await auth();
    await sut.authenticate(`Bearer ${SECRET}`);
    sut.forget('t1');
    tokens.findActiveByHash.mockResolvedValue(null);
    await expect(sut.authenticate(`Bearer ${SECRET}`)).rejects.toMatchObject({ status: 401 });
  });
});

describe('AuthService.issue and bootstrap', () => {
  it('stores only the hash and the prefix of a new token', async () => {
    const { sut, tokens } = await auth();
    tokens.issue.mockImplementation(async (t) => t as never);
    const { token: secret } = await sut.issue('w1', 'ci', 'member');
    expect(secret).toMatch(/^tern_[A-Za-z0-9_-]{43}$/);
    expect(tokens.issue).toHaveBeenCalledWith({
      workspaceId: 'w1',
      name: 'ci',
      role: 'member',
      expiresAt: null,
      tokenHash: hashToken(secret),
      prefix: secret.slice(0, 8),
    });
  });

  it('installs BOOTSTRAP_ADMIN_TOKEN as an operator of the default workspace, and nothing without it', async () => {
    const { sut, tokens } = await auth(SECRET);
    await sut.onApplicationBootstrap();
    expect(tokens.ensureWorkspaceToken).toHaveBeenCalledWith(
      DEFAULT_WORKSPACE,
      expect.objectContaining({ role: 'operator', tokenHash: hashToken(SECRET) }),
    );
    const none = await auth();
    await none.sut.onApplicationBootstrap();
    expect(none.tokens.ensureWorkspaceToken).not.toHaveBeenCalled();
  });
});
