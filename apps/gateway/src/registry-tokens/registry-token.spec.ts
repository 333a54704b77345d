import { createPublicKey, generateKeyPairSync, verify } from 'node:crypto';
import { registryRights } from './registry-rights.js';
import { grantAccess, libtrustKeyId, parseScopes, signRegistryToken } from './registry-token.js';

const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
const signer = { key: privateKey, issuer: 'tern', service: 'tern-registry', ttlSeconds: 300 };

function decode(token: string): { header: Record<string, unknown>; claims: Record<string, unknown>; signed: string; sig: Buffer } {
  const [h, c, s] = token.split('.');
  return {
    header: JSON.parse(Buffer.from(h!, 'base64url').toString()) as Record<string, unknown>,
    claims: JSON.parse(Buffer.from(c!, 'base64url').toString()) as Record<string, unknown>,
    signed: `${h}.${c}`,
    sig: Buffer.from(s!, 'base64url'),
  };
}

describe('registry tokens', () => {
  it('names the key as libtrust does: 12 colon-separated groups of 4 base32 characters, stable per key', () => {
    const id = libtrustKeyId(privateKey);
    expect(id).toMatch(/^([A-Z2-7]{4}:){11}[A-Z2-7]{4}$/);
    expect(libtrustKeyId(createPublicKey(privateKey))).toBe(id);
    expect(libtrustKeyId(generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey)).not.toBe(id);
  });

  it('signs an ES256 JWT with the claims the registry checks, valid for the TTL only', () => {
    const now = Date.UTC(2026, 0, 1);
    const access = [{ type: 'repository', name: 'builds/a', actions: ['pull'] }];
    const { token, expiresIn, issuedAt } = signRegistryToken(signer, 'machine:m1', access, now);
    const { header, claims, signed, sig } = decode(token);
    expect(header).toEqual({ typ: 'JWT', alg: 'ES256', kid: libtrustKeyId(privateKey) });
    expect(claims).toMatchObject({ iss: 'tern', aud: 'tern-registry', sub: 'machine:m1', iat: now / 1000, exp: now / 1000 + 300, access });
    expect(claims.nbf).toBeLessThanOrEqual(now / 1000);
    expect(expiresIn).toBe(300);
    expect(issuedAt).toBe('2026-01-01T00:00:00.000Z');
    expect(sig).toHaveLength(64); // r||s, not DER
    expect(verify('sha256', Buffer.from(signed), { key: createPublicKey(privateKey), dsaEncoding: 'ieee-p1363' }, sig)).toBe(true);
  });

  it('parses repeated and space-separated scopes, and refuses malformed ones', () => {
    expect(parseScopes(['repository:team/model:pull,push', 'repository:a:pull registry:catalog:*'])).toEqual([
      { type: 'repository', name: 'team/model', actions: ['pull', 'push'] },
      { type: 'repository', name: 'a', actions: ['pull'] },
      { type: 'registry', name: 'catalog', actions: ['*'] },
    ]);
    expect(parseScopes(['repository(plugin):x/y:pull'])).toEqual([{ type: 'repository(plugin)', name: 'x/y', actions: ['pull'] }]);
    expect(() => parseScopes(['repository:nothing'])).toThrow('scope "repository:nothing" is not <type>:<name>:<actions>');
    expect(() => parseScopes([':a:pull'])).toThrow(/not <type>:<name>:<actions>/);
    expect(parseScopes([])).toEqual([]);
  });

  it('grants a machine pull of the repositories placed on it only, and never push', async () => {
    const placed = new Set(['builds/mine']);
    const rights = registryRights({ kind: 'machine', builder: false, placed: async (r) => placed.has(r) });
    const asked = parseScopes(['repository:builds/mine:pull,push', 'repository:builds/theirs:pull', 'registry:catalog:*']);
    expect(await grantAccess(asked, rights)).toEqual([{ type: 'repository', name: 'builds/mine', actions: ['pull'] }]);
  });

  it('grants a builder machine push of builds only, a workspace its own builds and the base, the operator everything', async () => {
    const asked = parseScopes(['repository:builds/x:pull,push', 'repository:tern/base:pull,push', 'registry:catalog:*']);
    const builder = registryRights({ kind: 'machine', builder: true, placed: async () => false });
    expect(await grantAccess(asked, builder)).toEqual([
      { type: 'repository', name: 'builds/x', actions: ['pull', 'push'] },
      { type: 'repository', name: 'tern/base', actions: ['pull'] },
    ]);
    const workspace = registryRights({ kind: 'workspace', workspaceId: 'w1' });
    const own = parseScopes(['repository:builds/w1/x:pull,push', 'repository:builds/w2/x:pull,push', 'repository:builds/x:pull']);
    expect(await grantAccess([...own, ...asked], workspace)).toEqual([
      { type: 'repository', name: 'builds/w1/x', actions: ['pull', 'push'] },
      { type: 'repository', name: 'tern/base', actions: ['pull'] },
    ]);
    expect(await grantAccess(parseScopes(['repository:team/other:pull']), workspace)).toEqual([]);
    expect(await grantAccess(asked, registryRights({ kind: 'operator' }))).toEqual([
      { type: 'repository', name: 'builds/x', actions: ['pull', 'push'] },
      { type: 'repository', name: 'tern/base', actions: ['pull', 'push'] },
      { type: 'registry', name: 'catalog', actions: ['*'] },
    ]);
    expect(await grantAccess(parseScopes(['repository:a:delete,*']), registryRights({ kind: 'operator' }))).toEqual([]);
  });
});
