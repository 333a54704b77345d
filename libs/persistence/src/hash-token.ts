import { createHash } from 'node:crypto';

/**
 * The form in which API tokens and machine join tokens are stored and looked up: sha256, hex.
 * Tokens are long random strings, so a plain fast hash is enough (no salt, no KDF): there is
 * nothing to brute-force, and lookups stay one indexed equality.
 */
export function hashToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}
