import { randomBytes } from 'node:crypto';
import { JOIN_TOKEN_PREFIX, MACHINE_TOKEN_PREFIX } from '#tern/contracts';

/**
 * Machine credentials look like API tokens (256 random bits, url-safe) with a prefix that
 * says what they are, so a token pasted in the wrong place is recognisable at a glance.
 * Only their sha256 (hashToken) is stored.
 */
export function generateJoinToken(): string {
  return `${JOIN_TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
}

export function generateMachineToken(): string {
  return `${MACHINE_TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
}

/** A machine id for `tern machine create` without --id: short enough to type, random enough not to collide. */
export function generateMachineId(): string {
  return `m-${randomBytes(5).toString('hex')}`;
}
