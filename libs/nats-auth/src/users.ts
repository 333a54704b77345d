import { decode, encodeUser, fmtCreds } from '@nats-io/jwt';
import { createUser, fromPublic } from '@nats-io/nkeys';
import { type NatsPrincipal } from '#tern/contracts';
import { type Installation, keyPair } from './installation.js';
import {
  integratorPermissions,
  type IntegratorUserOptions,
  type NatsPermissions,
  permissionsFor,
  taskPermitPermissions,
} from './permissions.js';

const text = new TextDecoder();

export interface UserClaims {
  /** Shown in server logs and connz. */
  name: string;
  /** The user's public key (U…); its seed stays with whoever connects. */
  publicKey: string;
  permissions: NatsPermissions;
  /** Lifetime; without, the user never expires (control-plane services). */
  expiresInSeconds?: number;
}

/** A user JWT signed with the account's signing key. */
export async function issueUserJwt(signer: AccountSigner, claims: UserClaims): Promise<string> {
  const user = fromPublic(claims.publicKey);
  const exp = claims.expiresInSeconds ? Math.floor(Date.now() / 1000) + claims.expiresInSeconds : undefined;
  return encodeUser(
    claims.name,
    user,
    keyPair(signer.signingKey),
    {
      issuer_account: signer.account,
      subs: -1,
      data: -1,
      payload: -1,
      pub: claims.permissions.pub,
      sub: claims.permissions.sub,
      ...(claims.permissions.resp ? { resp: claims.permissions.resp } : {}),
    },
    exp ? { exp } : {},
  );
}

/**
 * A `.creds` file (JWT and seed) with a principal's permissions in one namespace, for a new key
 * pair or, given its seed, the key pair the principal already has (re-issued permissions).
 */
export async function serviceCreds(inst: Installation, principal: NatsPrincipal, namespace: string, seed?: string): Promise<string> {
  const kp = seed ? keyPair(seed) : createUser();
  const jwt = await issueUserJwt(
    { account: inst.account.publicKey, signingKey: inst.account.signingKey.seed },
    {
      name: `${namespace}-${principal}`,
      publicKey: kp.getPublicKey(),
      permissions: permissionsFor(principal, { namespace }),
    },
  );
  return text.decode(fmtCreds(jwt, kp));
}

/** A `.creds` file for a user with the given permissions (operator tools, test harness). */
export async function credsWith(inst: Installation, name: string, permissions: NatsPermissions): Promise<string> {
  const kp = createUser();
  const jwt = await issueUserJwt(
    { account: inst.account.publicKey, signingKey: inst.account.signingKey.seed },
    { name, publicKey: kp.getPublicKey(), permissions },
  );
  return text.decode(fmtCreds(jwt, kp));
}

/** Everything in the account: provisioning (streams and buckets of every namespace) and operator tools. */
export const ADMIN_PERMISSIONS: NatsPermissions = { pub: { allow: ['>'] }, sub: { allow: ['>'] } };

/**
 * What the gateway needs to issue and revoke machine users: the account, its signing key, the
 * operator's signing key (to re-sign the account with a revocation) and a system-account user
 * (to push it); never the operator's or the account's identity keys.
 */
export interface AccountSigner {
  account: string;
  signingKey: string;
  operatorSigningKey?: string;
  /** .creds text of a system-account user. */
  systemUser?: string;
}

export async function accountSigner(inst: Installation): Promise<AccountSigner> {
  const kp = createUser();
  const systemJwt = await encodeUser('tern-revoker', kp, keyPair(inst.system.seed), {});
  return {
    account: inst.account.publicKey,
    signingKey: inst.account.signingKey.seed,
    operatorSigningKey: inst.operator.signingKey.seed,
    systemUser: text.decode(fmtCreds(systemJwt, kp)),
  };
}

/** A machine's user JWT: the agent's permissions with its machine id, for the key pair the agent holds. */
export function issueMachineJwt(
  signer: AccountSigner,
  opts: { namespace: string; machineId: string; publicKey: string; expiresInSeconds: number },
): Promise<string> {
  return issueUserJwt(signer, {
    name: `${opts.namespace}-machine-${opts.machineId}`,
    publicKey: opts.publicKey,
    permissions: permissionsFor('agent', { namespace: opts.namespace, machineId: opts.machineId }),
    expiresInSeconds: opts.expiresInSeconds,
  });
}

/** An integrator's user JWT (`tern nats user create`), for the key pair the integrator holds. */
export function issueIntegratorJwt(
  signer: AccountSigner,
  opts: IntegratorUserOptions & { name: string; publicKey: string; expiresInSeconds?: number },
): Promise<string> {
  return issueUserJwt(signer, {
    name: `${opts.namespace}-integrator-${opts.workspaceId}-${opts.name}`,
    publicKey: opts.publicKey,
    permissions: integratorPermissions(opts),
    ...(opts.expiresInSeconds ? { expiresInSeconds: opts.expiresInSeconds } : {}),
  });
}

/**
 * A machine's task permit for one task-queue version: a second user JWT for the machine's own key
 * (revoked with it), allowed only that version's consumer (taskPermitPermissions).
 */
export function issueTaskPermitJwt(
  signer: AccountSigner,
  opts: { namespace: string; machineId: string; publicKey: string; deploymentId: string; version: number; expiresInSeconds: number },
): Promise<string> {
  return issueUserJwt(signer, {
    name: `${opts.namespace}-machine-${opts.machineId}-permit-${opts.deploymentId}-v${opts.version}`,
    publicKey: opts.publicKey,
    permissions: taskPermitPermissions(opts),
    expiresInSeconds: opts.expiresInSeconds,
  });
}

/** When a user JWT expires (ms since the epoch), or undefined when it does not. */
export function jwtExpiresAt(jwt: string): number | undefined {
  const exp = decode(jwt).exp;
  return exp ? exp * 1000 : undefined;
}

/** A new user key pair (the agent's: the seed stays on the machine). */
export function newUserKey(): { publicKey: string; seed: string } {
  const kp = createUser();
  return { publicKey: kp.getPublicKey(), seed: text.decode(kp.getSeed()) };
}

/** The user seed in a `.creds` file's text, or undefined when there is none. */
export function credsSeed(creds: string): string | undefined {
  return /-----BEGIN USER NKEY SEED-----\s+(SU[A-Z2-7]+)\s+------END USER NKEY SEED------/.exec(creds)?.[1];
}

/** The `.creds` text for a user JWT and the seed of its key pair. */
export function formatCreds(jwt: string, seed: string): string {
  return text.decode(fmtCreds(jwt, keyPair(seed)));
}
