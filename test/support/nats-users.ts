import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as delay } from 'node:timers/promises';
import { AuthorizationError, connect, credsAuthenticator, type NatsConnection, PermissionViolationError } from '@nats-io/transport-node';
import { type AccountSigner, formatCreds, issueMachineJwt, issueTaskPermitJwt, newUserKey } from '#tern/nats-auth';
import { TEST_NATS_URL } from './isolation.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The run's operator material (global-setup): where service creds and the gateway's signer live. */
export function natsAuthDir(): string {
  const dir = process.env.TERN_NATS_AUTH_DIR;
  if (!dir) throw new Error('TERN_NATS_AUTH_DIR is not set: run integration tests through jest (test/support/global-setup.mjs)');
  return dir;
}

/** A control-plane service's own user in a namespace, as `npm run up` issues it: the .creds path. */
export function serviceCredsFile(service: string, namespace: string): string {
  const out = execFileSync(process.execPath, ['scripts/nats-auth.mjs', 'creds', natsAuthDir(), namespace, service], { cwd: ROOT });
  return (JSON.parse(out.toString()) as Record<string, string>)[service];
}

/** A machine's user, issued the way the gateway issues it at registration: the .creds text. */
export async function machineCreds(namespace: string, machineId: string, expiresInSeconds = 3600): Promise<string> {
  const signer = JSON.parse(readFileSync(join(natsAuthDir(), 'signer.json'), 'utf8')) as AccountSigner;
  const key = newUserKey();
  const jwt = await issueMachineJwt(signer, { namespace, machineId, publicKey: key.publicKey, expiresInSeconds });
  return formatCreds(jwt, key.seed);
}

/** A machine's task permit for one task-queue version, issued the way the gateway issues it: the .creds text. */
export async function taskPermitCreds(namespace: string, machineId: string, deploymentId: string, version: number): Promise<string> {
  const signer = JSON.parse(readFileSync(join(natsAuthDir(), 'signer.json'), 'utf8')) as AccountSigner;
  const key = newUserKey();
  const jwt = await issueTaskPermitJwt(signer, {
    namespace,
    machineId,
    publicKey: key.publicKey,
    deploymentId,
    version,
    expiresInSeconds: 600,
  });
  return formatCreds(jwt, key.seed);
}

/** The harness's own user (TEST_NATS_CREDS), valid on every server of the run's installation. */
export function asHarness() {
  const creds = process.env.TEST_NATS_CREDS;
  if (!creds) throw new Error('TEST_NATS_CREDS is not set: run integration tests through jest (test/support/global-setup.mjs)');
  return credsAuthenticator(readFileSync(creds));
}

/** Connects with a .creds text, not reconnecting: the test watches what the server does to it. */
export function connectAs(creds: string, inboxPrefix: string): Promise<NatsConnection> {
  return connect({
    servers: TEST_NATS_URL,
    authenticator: credsAuthenticator(new TextEncoder().encode(creds)),
    inboxPrefix,
    reconnect: false,
  });
}

/**
 * connectAs for a stand-in machine that must get on, as an agent does: a connect a busy server
 * dropped before reading it (a broken pipe or reset, its 2 s auth timeout under load) is tried
 * again; a refusal of the credentials is not.
 */
export async function connectAsMachine(creds: string, inboxPrefix: string, attempts = 5): Promise<NatsConnection> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await connectAs(creds, inboxPrefix);
    } catch (e) {
      if (attempt >= attempts || e instanceof AuthorizationError) throw e;
      await delay(250 * attempt);
    }
  }
}

/** The permission violation the server reports for an operation on a subject (fails after 5 s without one). */
export async function refused(
  nc: NatsConnection,
  op: 'publish' | 'subscription',
  subject: string,
  act: () => void,
): Promise<PermissionViolationError> {
  const seen = (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'error' && s.error instanceof PermissionViolationError && s.error.subject === subject && s.error.operation === op)
        return s.error;
    }
    throw new Error('connection closed without a permission violation');
  })();
  act();
  await nc.flush();
  return Promise.race([
    seen,
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no violation for ${op} ${subject}`)), 5000)),
  ]);
}
