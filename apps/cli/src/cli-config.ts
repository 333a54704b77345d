import { readContext, resolveConnection, type TernContext } from '#tern/client';

export type CliContext = TernContext;

/**
 * Where the CLI finds the gateway and token: TERN_GATEWAY / TERN_TOKEN, else the current
 * context of ~/.tern/config.json (written by `npm run up`), else the local default; the SDKs
 * read the same.
 */
export function resolveContext(env: NodeJS.ProcessEnv = process.env, contextName?: string): CliContext & { source: string } {
  const { ctx } = readContext(env, contextName);
  return { ...resolveConnection(env, contextName), ...registryOf(env, ctx) };
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
