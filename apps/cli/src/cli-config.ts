import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

export interface CliContext {
  gateway: string;
  token?: string;
  /** The image registry and the builders' user (npm run up writes its private one): `tern image base` pushes there. */
  registry?: { url: string; insecure?: boolean; username?: string; password?: string };
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
    ...registryOf(env, ctx),
    source: env.TERN_GATEWAY ? 'TERN_GATEWAY' : ctx ? `${path} (${name})` : 'default',
  };
}

/** REGISTRY_URL (with REGISTRY_PUSH_USERNAME / REGISTRY_PUSH_PASSWORD) over the context's registry. */
function registryOf(env: NodeJS.ProcessEnv, ctx: CliContext | undefined): Pick<CliContext, 'registry'> {
  if (env.REGISTRY_URL) {
    return {
      registry: {
        url: env.REGISTRY_URL,
        insecure: env.REGISTRY_URL.startsWith('http://'),
        ...(env.REGISTRY_PUSH_USERNAME ? { username: env.REGISTRY_PUSH_USERNAME, password: env.REGISTRY_PUSH_PASSWORD ?? '' } : {}),
      },
    };
  }
  return ctx?.registry ? { registry: ctx.registry } : {};
}
