import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root: scripts/lib/.. /.. */
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Where `up` keeps its state, logs and private servers: TERN_HOME or <repo>/.tern. */
export function stateDir(env = process.env) {
  return env.TERN_HOME ? resolve(env.TERN_HOME) : join(REPO_ROOT, '.tern');
}

/** The CLI's config file, read by bin/tern.js. */
export function cliConfigPath() {
  return join(homedir(), '.tern', 'config.json');
}

export const SERVICE_MAIN = (svc) => join(REPO_ROOT, 'dist', 'apps', svc, 'src', 'main.js');

/** The five control-plane services, in start order, then the agent. Mirrors libs/config/src/variables.ts. */
export const CONTROL_PLANE = ['gateway', 'scheduler', 'autoscaler', 'metering', 'reputation'];
export const SERVICES = [...CONTROL_PLANE, 'agent'];
export const WITH_DATABASE = ['gateway', 'scheduler', 'metering', 'reputation'];
