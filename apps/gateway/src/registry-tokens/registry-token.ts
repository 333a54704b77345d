import { createHash, createPublicKey, type KeyObject, randomUUID, sign } from 'node:crypto';

/**
 * The Docker token-auth protocol, as the reference registry (distribution 2.8) checks it: a JWT
 * whose `access` claim lists what the bearer may do with which repository, signed with a key the
 * registry trusts through its `rootcertbundle`. Framework-free, so the rules are unit-tested.
 */

/** One entry of a scope (`repository:team/model:pull,push`) or of the token's `access` claim. */
export interface RegistryAccessEntry {
  type: string;
  name: string;
  actions: string[];
}

/** What one principal may do: the grant keeps the requested actions these allow, drops the rest. */
export interface RegistryRights {
  pull(repository: string): boolean | Promise<boolean>;
  push(repository: string): boolean | Promise<boolean>;
  /** `GET /v2/_catalog` (`registry:catalog:*`): every repository's name. */
  catalog: boolean;
}

/**
 * The key id distribution matches a token's `kid` against: libtrust's fingerprint of the public
 * key (SHA-256 of its DER SubjectPublicKeyInfo, first 240 bits, base32, in colon-separated
 * groups of four). A certificate in the rootcertbundle is trusted under this id.
 */
export function libtrustKeyId(key: KeyObject): string {
  const publicKey = key.type === 'public' ? key : createPublicKey(key);
  const der = publicKey.export({ type: 'spki', format: 'der' });
  const b32 = base32(createHash('sha256').update(der).digest().subarray(0, 30));
  return b32.match(/.{4}/g)!.join(':');
}

/** RFC 4648 base32 without padding (30 bytes give 48 characters, no padding needed). */
function base32(bytes: Uint8Array): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  let bits = 0;
  let value = 0;
  let out = '';
  for (const b of bytes) {
    value = (value << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += alphabet[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += alphabet[(value << (5 - bits)) & 31];
  return out;
}

/**
 * The `scope` parameters of a token request (repeated, or space-separated as some clients send
 * them). A repository name has no colon, but a scope's type may carry a class (`repository(plugin)`),
 * so the name is what lies between the first and the last colon. Malformed entries are errors.
 */
export function parseScopes(scopes: readonly string[]): RegistryAccessEntry[] {
  const out: RegistryAccessEntry[] = [];
  for (const scope of scopes.flatMap((s) => s.split(' ')).filter(Boolean)) {
    const first = scope.indexOf(':');
    const last = scope.lastIndexOf(':');
    if (first <= 0 || last === first) throw new Error(`scope "${scope}" is not <type>:<name>:<actions>`);
    const actions = scope
      .slice(last + 1)
      .split(',')
      .filter(Boolean);
    out.push({ type: scope.slice(0, first), name: scope.slice(first + 1, last), actions });
  }
  return out;
}

/**
 * Of the requested access, what `rights` allow. Like every token service the answer is a token
 * with less access rather than a refusal: the registry then answers the client's request with
 * its own "denied". Unknown types and actions (delete, `*` on a repository) are never granted.
 */
export async function grantAccess(requested: readonly RegistryAccessEntry[], rights: RegistryRights): Promise<RegistryAccessEntry[]> {
  const granted: RegistryAccessEntry[] = [];
  for (const { type, name, actions } of requested) {
    const allowed: string[] = [];
    if (type === 'repository') {
      for (const action of new Set(actions)) {
        if (action === 'pull' && (await rights.pull(name))) allowed.push(action);
        if (action === 'push' && (await rights.push(name))) allowed.push(action);
      }
    } else if (type === 'registry' && name === 'catalog' && actions.includes('*') && rights.catalog) allowed.push('*');
    if (allowed.length) granted.push({ type, name, actions: allowed });
  }
  return granted;
}

export interface RegistryTokenSigner {
  /** The EC P-256 private key whose certificate is the registry's rootcertbundle. */
  key: KeyObject;
  /** The registry's `auth.token.issuer`. */
  issuer: string;
  /** The registry's `auth.token.service` (the token's audience). */
  service: string;
  ttlSeconds: number;
}

/** A signed registry token (ES256, `kid` in libtrust form) for `subject` with `access`. */
export function signRegistryToken(
  signer: RegistryTokenSigner,
  subject: string,
  access: readonly RegistryAccessEntry[],
  now = Date.now(),
): { token: string; expiresIn: number; issuedAt: string } {
  const iat = Math.floor(now / 1000);
  const header = { typ: 'JWT', alg: 'ES256', kid: libtrustKeyId(signer.key) };
  const claims = {
    iss: signer.issuer,
    sub: subject,
    aud: signer.service,
    // A little slack before now: the registry's clock may run behind the gateway's.
    nbf: iat - 30,
    iat,
    exp: iat + signer.ttlSeconds,
    jti: randomUUID(),
    access,
  };
  const input = `${b64url(header)}.${b64url(claims)}`;
  const signature = sign('sha256', Buffer.from(input), { key: signer.key, dsaEncoding: 'ieee-p1363' });
  return {
    token: `${input}.${signature.toString('base64url')}`,
    expiresIn: signer.ttlSeconds,
    issuedAt: new Date(iat * 1000).toISOString(),
  };
}

function b64url(value: object): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}
