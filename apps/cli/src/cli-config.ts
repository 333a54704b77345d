import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

export interface CliContext {
  gateway: string;
  token?: string;
}

export interface CliConfigFile {
  current?: string;
  contexts?: Record<string, CliContext>;
}

export function cliConfigPath(env: NodeJS.ProcessEnv = process.env): string {
  return env.TERN_CONFIG ?? join(env.HOME ?? homedir(), '.tern', 'config.json');
}

/**
 * Where the CLI finds the gateway and token: TERN_GATEWAY / TERN_TOKEN, else the current
 * context of ~/.tern/config.json (written by `npm run up`), else the local default.
 */
export function resolveContext(env: NodeJS.ProcessEnv = process.env, contextName?: string): CliContext & { source: string } {
  let file: CliConfigFile = {};
  const path = cliConfigPath(env);
  try {
    file = JSON.parse(readFileSync(path, 'utf8')) as CliConfigFile;
  } catch {
    /* no config yet */
  }
  const name = contextName ?? file.current;
  const ctx = name ? file.contexts?.[name] : undefined;
  if (contextName && !ctx) throw new Error(`no context "${contextName}" in ${path}`);
  return {
    gateway: (env.TERN_GATEWAY ?? ctx?.gateway ?? 'http://127.0.0.1:1994').replace(/\/+$/, ''),
    token: env.TERN_TOKEN ?? ctx?.token,
    source: env.TERN_GATEWAY ? 'TERN_GATEWAY' : ctx ? `${path} (${name})` : 'default',
  };
}
