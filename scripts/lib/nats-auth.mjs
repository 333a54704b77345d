import { chownSync, existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { CONTROL_PLANE, REPO_ROOT } from './paths.mjs';

/**
 * NATS operator mode for `npm run up` and the test harness: one place that creates the
 * installation's operator material (once, under <dir>/operator, mode 600), the server config,
 * the gateway's account signer and one .creds file per principal. Uses the built libs/nats-auth
 * (dist/), so it runs after `npm run build`.
 */
async function natsAuth() {
  return import(pathToFileURL(join(REPO_ROOT, 'dist', 'libs', 'nats-auth', 'src', 'index.js')).href);
}

/** Paths under a NATS dir (.tern/nats, or the test run's). */
export function natsAuthFiles(dir) {
  return {
    operatorDir: join(dir, 'operator'),
    config: join(dir, 'server.conf'),
    resolver: join(dir, 'jwt'),
    store: join(dir, 'store'),
    signer: join(dir, 'signer.json'),
    creds: join(dir, 'creds'),
  };
}

/**
 * The operator material kept in dir (created the first time; or taken from operatorDir, for a
 * second server of the same installation) and the server config for host:port. Returns the
 * paths of natsAuthFiles and the Tern account's public key (its directory in the JetStream store).
 */
export async function prepareServer(dir, { host, port, operatorDir, tls, monitor, serverName, cluster }) {
  const a = await natsAuth();
  const f = natsAuthFiles(dir);
  const inst = await a.ensureInstallation(operatorDir ?? f.operatorDir);
  mkdirSync(f.resolver, { recursive: true, mode: 0o700 });
  mkdirSync(f.store, { recursive: true });
  // Rewritten at every start: the account JWT in it carries the latest revocations.
  a.writeSecret(
    f.config,
    a.serverConfig(inst, { host, port, storeDir: f.store, resolverDir: f.resolver, tls, monitor, serverName, cluster }),
  );
  a.writeSecret(f.signer, JSON.stringify(await a.accountSigner(inst), null, 2));
  return { ...f, accountPublicKey: inst.account.publicKey };
}

/**
 * Writes <dir>/creds/<namespace>/<principal>.creds for each principal (its least-privilege user
 * in that namespace) and admin.creds (every subject: provisioning and operator tools); returns
 * { principal: path }.
 */
export async function writeCreds(dir, namespace, principals) {
  const a = await natsAuth();
  const f = natsAuthFiles(dir);
  const inst = await a.ensureInstallation(f.operatorDir);
  const out = join(f.creds, namespace);
  mkdirSync(out, { recursive: true, mode: 0o700 });
  const paths = {};
  for (const p of principals) {
    paths[p] = join(out, `${p}.creds`);
    a.writeSecret(paths[p], await a.serviceCreds(inst, p, namespace));
  }
  return paths;
}

/** A .creds file for an account-wide user (test harness, operator tools). */
export async function writeAdminCreds(dir, name = 'admin') {
  const a = await natsAuth();
  const f = natsAuthFiles(dir);
  const inst = await a.ensureInstallation(f.operatorDir);
  mkdirSync(f.creds, { recursive: true, mode: 0o700 });
  const path = join(f.creds, `${name}.creds`);
  a.writeSecret(path, await a.credsWith(inst, name, a.ADMIN_PERMISSIONS));
  return path;
}

/**
 * The operator material laid out for a NATS that runs in its own container (docker-compose,
 * Kubernetes), one folder per reader, so each can be mounted (a volume, a Secret) only where it
 * is needed:
 *   <dir>/operator/installation.json  every seed: stays with whoever runs this (the init job)
 *   <dir>/server/server.conf          the NATS server (operator and account JWTs, no seed)
 *   <dir>/gateway/{nats.creds,signer.json}  the gateway: its user and the account signer
 *   <dir>/<service>/nats.creds        scheduler, autoscaler, metering, reputation: each its own user
 * Idempotent: the installation's keys and each service's user key are made once and kept; a
 * later run re-issues each service's JWT (the permissions of this version of Tern) for the same
 * key and rewrites server.conf for the given paths. `owner` (uid:gid) is given the service
 * folders, for services that run unprivileged. Returns { server, principals: { svc: folder } }.
 */
export async function writeDeployment(dir, { namespace, host, port, storeDir, resolverDir, tls, owner, leafPort, jetStreamDomain }) {
  const a = await natsAuth();
  const inst = await a.ensureInstallation(join(dir, 'operator'));
  const folder = (name) => {
    const d = join(dir, name);
    mkdirSync(d, { recursive: true, mode: 0o700 });
    return d;
  };
  const server = join(folder('server'), 'server.conf');
  a.writeSecret(server, a.serverConfig(inst, { host, port, storeDir, resolverDir, tls, leafPort, jetStreamDomain }));
  const principals = {};
  for (const svc of CONTROL_PLANE) {
    const d = folder(svc);
    const creds = join(d, DEPLOYED_CREDS);
    const seed = existsSync(creds) ? a.credsSeed(readFileSync(creds, 'utf8')) : undefined;
    a.writeSecret(creds, await a.serviceCreds(inst, svc, namespace, seed));
    if (svc === 'gateway') {
      const signer = join(d, DEPLOYED_SIGNER);
      if (!existsSync(signer)) a.writeSecret(signer, JSON.stringify(await a.accountSigner(inst), null, 2));
    }
    if (owner) for (const f of [d, ...readdirSync(d).map((n) => join(d, n))]) chownSync(f, owner.uid, owner.gid);
    principals[svc] = d;
  }
  return { server, principals };
}

/** File names inside a service's folder of writeDeployment (where NATS_CREDS and NATS_ACCOUNT_SIGNER point). */
export const DEPLOYED_CREDS = 'nats.creds';
export const DEPLOYED_SIGNER = 'signer.json';
