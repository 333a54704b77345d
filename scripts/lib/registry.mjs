import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { get as httpGet } from 'node:http';
import { get as httpsGet } from 'node:https';
import { pathToFileURL } from 'node:url';
import { urlHost } from './exposure.mjs';
import { UserError } from './log.mjs';
import { tail } from './logs.mjs';
import { isSameProcess, procStart, sleep, stopProcess, which } from './proc.mjs';
import { newPassword, readJson, writeJson } from './state.mjs';

/**
 * The private OCI registry `npm run up` starts when REGISTRY_URL is not set: Debian's
 * docker-registry (the reference distribution server) with its blobs and config under `dir`.
 *
 * With `token` ({ realm, service, issuer }) it takes only tokens the gateway signs (Docker token
 * auth): the gateway's token service at `realm` decides who may pull or push what (a machine
 * pulls what is placed on it, builders and the operator push), the registry checks signatures
 * against the certificate of `dir/token-key.pem` (its rootcertbundle) and never sees a password.
 * The gateway gets the key: `keyFile` in the answer.
 *
 * Without it (tests of the static-credential path, as with an external REGISTRY_URL) two users,
 * `builder` (push) and `puller`, whose passwords live in `dir/credentials.json` (mode 600); the
 * registry only sees bcrypt hashes (htpasswd -B), and does not tell the two apart.
 *
 * @param {string} dir
 * @param {{ host?: string, port?: number, tls?: { certFile: string, keyFile: string }, token?: { realm: string, service: string, issuer: string } }} [options]
 */
export function prepareRegistry(dir, { host = '127.0.0.1', port, tls, token } = {}) {
  mkdirSync(join(dir, 'storage'), { recursive: true });
  const auth = token ? tokenAuth(dir, token) : htpasswdAuth(dir);
  const config = [
    'version: 0.1',
    'log:',
    '  level: info',
    'storage:',
    '  filesystem:',
    `    rootdirectory: ${JSON.stringify(join(dir, 'storage'))}`,
    '  delete:',
    '    enabled: true',
    'http:',
    `  addr: ${JSON.stringify(`${urlHost(host)}:${port}`)}`,
    ...(tls ? ['  tls:', `    certificate: ${JSON.stringify(tls.certFile)}`, `    key: ${JSON.stringify(tls.keyFile)}`] : []),
    'auth:',
    ...auth.lines,
    '',
  ].join('\n');
  writeFileSync(join(dir, 'config.yml'), config, { mode: 0o600 });
  return {
    config: join(dir, 'config.yml'),
    credentials: auth.credentials,
    keyFile: auth.keyFile,
    host: `${urlHost(host)}:${port}`,
    insecure: !tls,
  };
}

/**
 * The token signing key (EC P-256, what distribution's ES256 wants; mode 600) and its self-signed
 * certificate, made once with openssl: the gateway signs with the key, the certificate is all
 * the registry needs (its rootcertbundle). An existing pair is kept.
 */
export function makeTokenKey(keyFile, certFile) {
  if (existsSync(keyFile) && existsSync(certFile)) return;
  const openssl = which('openssl');
  if (!openssl) throw new UserError('openssl not found (apt-get install openssl): it makes the registry token key');
  const r = spawnSync(
    openssl,
    ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '3650'].concat([
      '-subj',
      '/CN=tern registry tokens',
      '-keyout',
      keyFile,
      '-out',
      certFile,
    ]),
    { encoding: 'utf8' },
  );
  if (r.status !== 0) throw new UserError(`openssl could not make the registry token key: ${r.stderr}`);
  chmodSync(keyFile, 0o600);
}

/** The registry's `auth.token` section, with the key pair under `dir`. */
function tokenAuth(dir, { realm, service, issuer }) {
  const keyFile = join(dir, 'token-key.pem');
  const certFile = join(dir, 'token-cert.pem');
  makeTokenKey(keyFile, certFile);
  const lines = [
    '  token:',
    `    realm: ${JSON.stringify(realm)}`,
    `    service: ${JSON.stringify(service)}`,
    `    issuer: ${JSON.stringify(issuer)}`,
    `    rootcertbundle: ${JSON.stringify(certFile)}`,
  ];
  return { lines, keyFile, credentials: {} };
}

/** The two static users, `builder` and `puller`, made once (bcrypt hashes in dir/htpasswd). */
function htpasswdAuth(dir) {
  const credsFile = join(dir, 'credentials.json');
  const creds = readJson(credsFile, {}) ?? {};
  for (const role of ['builder', 'puller']) creds[role] ??= { username: role, password: newPassword() };
  writeJson(credsFile, creds, 0o600);
  const htpasswd = which('htpasswd');
  if (!htpasswd) throw new UserError('htpasswd not found (apt-get install apache2-utils)');
  const lines = ['builder', 'puller'].map((role) => {
    const r = spawnSync(htpasswd, ['-nbB', creds[role].username, creds[role].password], { encoding: 'utf8' });
    if (r.status !== 0) throw new UserError(`htpasswd failed: ${r.stderr}`);
    return r.stdout.trim();
  });
  writeFileSync(join(dir, 'htpasswd'), `${lines.join('\n')}\n`, { mode: 0o600 });
  const config = ['  htpasswd:', '    realm: tern', `    path: ${JSON.stringify(join(dir, 'htpasswd'))}`];
  return { lines: config, credentials: creds };
}

/**
 * Whether the registry answers its API root (401 without credentials counts: it is up). Over TLS
 * this only asks whether it listens: the certificate may be for the public name, not loopback, and
 * its CA unknown to this process, so it is not verified here (clients verify it when they use it).
 */
function registryAnswers(url) {
  return new Promise((resolve) => {
    const get = url.startsWith('https:') ? httpsGet : httpGet;
    const req = get(`${url}/v2/`, { timeout: 2000, rejectUnauthorized: false }, (res) => {
      res.resume();
      resolve(res.statusCode === 200 || res.statusCode === 401);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(false));
  });
}

/**
 * Starts the private registry detached (its own process group) and resolves once it answers:
 * { pid, start, port, url, host, insecure, credentials, keyFile, child }.
 */
export async function startRegistry({ dir, port, logFile, host = '127.0.0.1', localHost = host, tls, token }) {
  const bin = which('docker-registry');
  if (!bin) throw new UserError('docker-registry not found (apt-get install docker-registry, or set REGISTRY_URL)');
  const prepared = prepareRegistry(dir, { host, port, tls, token });
  const out = openSync(logFile, 'a');
  const child = spawn(bin, ['serve', prepared.config], { detached: true, stdio: ['ignore', out, out] });
  closeSync(out);
  let exited;
  child.once('exit', (code, sig) => (exited = sig ?? code));
  const url = `${tls ? 'https' : 'http'}://${urlHost(localHost)}:${port}`;
  const deadline = Date.now() + 15_000;
  while (!(await registryAnswers(url))) {
    if (exited !== undefined || Date.now() > deadline) {
      if (exited === undefined) child.kill('SIGKILL');
      throw new UserError(`private registry did not start on port ${port}; ${logFile}:\n${tail(logFile, 15)}`);
    }
    await sleep(100);
  }
  return {
    pid: child.pid,
    start: procStart(child.pid),
    port,
    url,
    host: `${urlHost(localHost)}:${port}`,
    insecure: !tls,
    credentials: prepared.credentials,
    keyFile: prepared.keyFile,
    child,
  };
}

export async function stopRegistry(rec) {
  if (rec && isSameProcess(rec)) await stopProcess(rec, 10_000);
}

/** What `npm run up` tells its registry and its gateway (REGISTRY_TOKEN_SERVICE / _ISSUER's defaults). */
export const TOKEN_SERVICE = 'tern-registry';
export const TOKEN_ISSUER = 'tern';
/** The gateway's token realm (REGISTRY_TOKEN_PATH in libs/contracts). */
export const TOKEN_REALM_PATH = '/api/v1/registry/token';

// `node scripts/lib/registry.mjs <dir> <port> [<token realm>]`: prepares the registry and runs it
// in the foreground (tests start one this way, so that they run the same configuration as `up`);
// with a realm, it takes the tokens of that gateway's token service.
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const [dir, port, realm] = process.argv.slice(2);
  if (!dir || !port) {
    console.error('usage: node scripts/lib/registry.mjs <dir> <port> [<token realm>]');
    process.exit(2);
  }
  const token = realm ? { realm, service: TOKEN_SERVICE, issuer: TOKEN_ISSUER } : undefined;
  const prepared = prepareRegistry(dir, { port: Number(port), token });
  if (!existsSync(prepared.config)) process.exit(1);
  const child = spawn(which('docker-registry') ?? 'docker-registry', ['serve', prepared.config], { stdio: 'inherit' });
  for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => child.kill(sig));
  child.on('exit', (code) => process.exit(code ?? 1));
}
