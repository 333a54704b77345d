import { type RegistryAccess, type RegistryAccessList } from '#tern/runtime';
import { type AgentContext } from '../agent-context.js';

/**
 * The one place the agent decides who it is to the image registry, read at each pull or push (the
 * machine token may have been rotated since the session began). Under token auth the machine logs
 * in with its id and its own machine token, and the gateway's token service decides what it may
 * do: pull what is placed on it, and push builds when its pool builds (REGISTRY_BUILDER_POOLS).
 * Otherwise it uses the user the gateway handed over at registration (pull only).
 */
export function registryCredentials(ctx: Pick<AgentContext, 'registration' | 'settings'>): RegistryAccessList {
  const registry = ctx.registration.registry;
  if (!registry) return [];
  const access: RegistryAccess = { host: registry.host, insecure: registry.insecure };
  if (registry.tokenAuth) return [{ ...access, username: ctx.registration.machineId, password: ctx.settings.token }];
  return [{ ...access, ...(registry.username ? { username: registry.username, password: registry.password ?? '' } : {}) }];
}
