import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { step, ok, warn, UserError, dim } from './log.mjs';
import { REPO_ROOT } from './paths.mjs';
import { isRoot, run, which } from './proc.mjs';
import { findPgBin } from './postgres.mjs';

/** apt package → how we tell it is installed. */
const PACKAGES = {
  'nats-server': () => which('nats-server'),
  postgresql: () => findPgBin(),
  runc: () => which('runc'),
  umoci: () => which('umoci'),
  // The agent's private container network: a bridge, namespaces and veths (ip), its rules (nft).
  nftables: () => which('nft'),
  iproute2: () => which('ip'),
  openssl: () => which('openssl'),
  // Tests only: the dashboard's browser test drives Chromium, the metrics test runs Prometheus.
  chromium: () => which('chromium'),
  prometheus: () => which('prometheus') && which('promtool'),
  // Images: the private registry (and htpasswd for its users), pulls and pushes, the Debian base.
  'docker-registry': () => which('docker-registry'),
  'apache2-utils': () => which('htpasswd'),
  skopeo: () => which('skopeo'),
  debootstrap: () => which('debootstrap'),
  // Agents unpack image layers pushed zstd (builds push them so) with the zstd tool.
  zstd: () => which('zstd'),
};

/**
 * Installs the missing system packages with apt when we are root. `required` are those `up`
 * cannot go on without (a private NATS/Postgres was asked for); the others are only needed by
 * the agent to run containers, so their absence is a warning.
 */
export async function ensureSystemPackages({ required = [], optional = [] }) {
  const missing = [...required, ...optional].filter((p) => !PACKAGES[p]());
  if (!missing.length) return;
  const canApt = isRoot() && which('apt-get');
  if (canApt) {
    step(`Installing ${missing.join(', ')} with apt-get`);
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    const update = await run('apt-get', ['update', '-qq'], { capture: true, env });
    if (update.code !== 0) warn(`apt-get update failed:\n${update.output.trim()}`);
    const install = await run(
      'apt-get',
      ['install', '-y', '-qq', '--no-install-recommends', '-o', 'Dpkg::Options::=--force-confold', ...missing],
      { capture: true, env },
    );
    if (install.code !== 0) warn(`apt-get install failed:\n${install.output.trim()}`);
  }
  const still = missing.filter((p) => !PACKAGES[p]());
  if (!still.length) {
    ok(`Installed ${missing.join(', ')}`);
    return;
  }
  const how = which('apt-get') ? `sudo apt-get install -y ${still.join(' ')}` : `install: ${still.join(', ')}`;
  const blocking = still.filter((p) => required.includes(p));
  if (blocking.length) {
    const hint =
      (blocking.includes('nats-server') ? '\n  or point NATS_URL at a NATS server with JetStream' : '') +
      (blocking.includes('postgresql') ? '\n  or point DATABASE_URL at a PostgreSQL database' : '');
    throw new UserError(`missing ${blocking.join(', ')}; ${how}${hint}`);
  }
  warn(`missing ${still.join(', ')} (the agent needs them to run containers): ${how}`);
}

function mtime(path) {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return 0;
  }
}

/** `npm ci` when node_modules is missing or older than package-lock.json. */
export async function ensureNodeModules() {
  const lock = join(REPO_ROOT, 'package-lock.json');
  const modules = join(REPO_ROOT, 'node_modules');
  // npm writes node_modules/.package-lock.json on every install: its age is the install's age.
  const installed = mtime(join(modules, '.package-lock.json')) || mtime(modules);
  const empty = !existsSync(modules) || readdirSync(modules).length === 0;
  if (!empty && installed >= mtime(lock)) return false;
  step(empty ? 'Installing npm dependencies (npm ci)' : 'package-lock.json changed: npm ci');
  const t0 = Date.now();
  const res = await run('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: REPO_ROOT, capture: true });
  if (res.code !== 0) {
    process.stderr.write(res.output);
    throw new UserError(
      /EUSAGE|in sync/.test(res.output)
        ? 'npm ci refused package-lock.json (out of sync with package.json): run `npm install` and commit the lock file (scripts/manifests.spec.ts says which optional packages it lacks)'
        : `npm ci failed (exit ${res.code})`,
    );
  }
  ok(`Dependencies installed ${dim(`(${((Date.now() - t0) / 1000).toFixed(1)}s)`)}`);
  return true;
}

/** `npm run build` (tsc, incremental). Output shown only when it fails. */
export async function build() {
  step('Building (npm run build)');
  const t0 = Date.now();
  const res = await run('npm', ['run', '--silent', 'build'], { cwd: REPO_ROOT, capture: true });
  if (res.code !== 0) {
    process.stderr.write(res.output);
    throw new UserError(`build failed (exit ${res.code})`);
  }
  ok(`Built ${dim(`(${((Date.now() - t0) / 1000).toFixed(1)}s)`)}`);
}

/** `npm run lint` (ESLint, type-aware, then Prettier's check). Output shown only when it fails. */
export async function lint() {
  step('Linting (npm run lint)');
  const t0 = Date.now();
  const res = await run('npm', ['run', '--silent', 'lint'], { cwd: REPO_ROOT, capture: true });
  if (res.code !== 0) {
    process.stderr.write(res.output);
    throw new UserError(`lint failed (exit ${res.code}): fix what it lists; \`npm run format\` rewrites the formatting`);
  }
  ok(`Lint clean ${dim(`(${((Date.now() - t0) / 1000).toFixed(1)}s)`)}`);
}
