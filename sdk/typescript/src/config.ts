import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** Where the gateway is and who calls it. */
export interface TernConnection {
  gateway: string;
  token?: string;
}

/**
 * One context of ~/.tern/config.json (`npm run up` writes `local`); the CLI keeps its registry there
 * too: `tern image base` pushes there with the builders' user, or, with `tokenAuth`, with the
 * gateway's tokens got with this context's token.
 */
export interface TernContext extends TernConnection {
  registry?: { url: string; insecure?: boolean; username?: string; password?: string; tokenAuth?: boolean };
}

export interface TernConfigFile {
  current?: string;
  contexts?: Record<string, TernContext>;
}

export const DEFAULT_GATEWAY = 'http://127.0.0.1:1994';

export function ternConfigPath(env: NodeJS.ProcessEnv = process.env): string {
  return env.TERN_CONFIG ?? join(env.HOME ?? homedir(), '.tern', 'config.json');
}

/** The named context (else the current one) of the config file, if any; a name that is not there is an error. */
export function readContext(
  env: NodeJS.ProcessEnv = process.env,
  contextName?: string,
): { name?: string; ctx?: TernContext; path: string } {
  const path = ternConfigPath(env);
  let file: TernConfigFile = {};
  try {
    file = JSON.parse(readFileSync(path, 'utf8')) as TernConfigFile;
  } catch {
    /* no config yet */
  }
  const name = contextName ?? file.current;
  const ctx = name ? file.contexts?.[name] : undefined;
  if (contextName && !ctx) throw new Error(`no context "${contextName}" in ${path}`);
  return { name, ctx, path };
}

/**
 * The gateway and token the CLI and the SDKs use: TERN_GATEWAY / TERN_TOKEN, else the current
 * context of ~/.tern/config.json, else the local default.
 */
export function resolveConnection(env: NodeJS.ProcessEnv = process.env, contextName?: string): TernConnection & { source: string } {
  const { name, ctx, path } = readContext(env, contextName);
  return {
    gateway: (env.TERN_GATEWAY ?? ctx?.gateway ?? DEFAULT_GATEWAY).replace(/\/+$/, ''),
    token: env.TERN_TOKEN ?? ctx?.token,
    source: env.TERN_GATEWAY ? 'TERN_GATEWAY' : ctx ? `${path} (${name})` : 'default',
  };
}
