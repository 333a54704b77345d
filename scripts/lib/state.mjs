import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

export function readJson(path, fallback = undefined) {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch (e) {
    if (e.code === 'ENOENT') return fallback;
    if (e instanceof SyntaxError) throw new Error(`${path} is not valid JSON: ${e.message}`, { cause: e });
    throw e;
  }
}

/** Writes JSON atomically (temp file + rename) so a reader never sees half a file. */
export function writeJson(path, value, mode = 0o644) {
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(value, null, 2)}\n`, { mode });
  chmodSync(tmp, mode);
  renameSync(tmp, path);
}

/** `tern_` + 43 base64url characters (32 random bytes). */
export function newAdminToken() {
  return `tern_${randomBytes(32).toString('base64url')}`;
}

export function newPassword() {
  return randomBytes(24).toString('base64url');
}

/** The files under the state dir. */
export function files(dir) {
  return {
    dir,
    state: join(dir, 'state.json'), // ports remembered between runs
    credentials: join(dir, 'credentials.json'), // operator token (BOOTSTRAP_ADMIN_TOKEN), secrets key, private Postgres password (mode 600)
    run: join(dir, 'run.json'), // what is running now: supervisor and child pids, ports
    lock: join(dir, 'up.pid'), // the supervisor's pid while it runs
    logs: join(dir, 'logs'),
    nats: join(dir, 'nats'),
    postgres: join(dir, 'postgres'),
    registry: join(dir, 'registry'), // the private OCI registry: config.yml, token-key.pem, token-cert.pem, storage/
  };
}

/** Loads credentials.json, creating whatever is missing (the operator token is generated once). */
export function loadCredentials(path) {
  const creds = readJson(path, {});
  let changed = false;
  if (!creds.adminToken) {
    creds.adminToken = newAdminToken();
    changed = true;
  }
  // Seals workspace secrets at rest (the gateway's SECRETS_KEY): losing it loses them.
  if (!creds.secretsKey) {
    creds.secretsKey = randomBytes(32).toString('base64');
    changed = true;
  }
  if (changed) writeJson(path, creds, 0o600);
  return creds;
}

export function updateJson(path, fn, mode) {
  const next = fn(readJson(path, {}));
  writeJson(path, next, mode);
  return next;
}
