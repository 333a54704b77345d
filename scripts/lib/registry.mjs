import { spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, writeFileSync } from 'node:fs';
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
 * docker-registry (the reference distribution server) with its blobs, config and users under
 * `dir`. Two users, as NATS has per-role identities: `builder` (the agents that build images and
 * `tern image base` push with it) and `puller` (the machines). Their passwords live in
 * `dir/credentials.json` (mode 600); the registry only sees bcrypt hashes (htpasswd -B).
 */
export function prepareRegistry(dir, { host = '127.0.0.1', port, tls } = {}) {
  mkdirSync(join(dir, 'storage'), { recursive: true });
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
    '  htpasswd:',
    '    realm: tern',
    `    path: ${JSON.stringify(join(dir, 'htpasswd'))}`,
    '',
  ].join('\n');
  writeFileSync(join(dir, 'config.yml'), config, { mode: 0o600 });
  return { config: join(dir, 'config.yml'), credentials: creds, host: `${urlHost(host)}:${port}`, insecure: !tls };
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
 * { pid, start, port, url, host, insecure, credentials, child }.
 */
export async function startRegistry({ dir, port, logFile, host = '127.0.0.1', localHost = host, tls }) {
  const bin = which('docker-registry');
  if (!bin) throw new UserError('docker-registry not found (apt-get install docker-registry, or set REGISTRY_URL)');
  const prepared = prepareRegistry(dir, { host, port, tls });
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
    child,
  };
}

export async function stopRegistry(rec) {
  if (rec && isSameProcess(rec)) await stopProcess(rec, 10_000);
}

// `node scripts/lib/registry.mjs <dir> <port>`: prepares the registry and runs it in the
// foreground (tests start one this way, so that they run the same configuration as `up`).
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const [dir, port] = process.argv.slice(2);
  if (!dir || !port) {
    console.error('usage: node scripts/lib/registry.mjs <dir> <port>');
    process.exit(2);
  }
  const prepared = prepareRegistry(dir, { port: Number(port) });
  if (!existsSync(prepared.config)) process.exit(1);
  const child = spawn(which('docker-registry') ?? 'docker-registry', ['serve', prepared.config], { stdio: 'inherit' });
  for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => child.kill(sig));
  child.on('exit', (code) => process.exit(code ?? 1));
}
