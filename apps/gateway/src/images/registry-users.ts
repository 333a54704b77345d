import type { TernConfig } from '#tern/config';
import type { MachineRegistryAccess } from '#tern/contracts';
import { parseRegistryRef, type RegistryAccess } from '#tern/runtime';
import type { RegistryTokens, RepositoryGrant } from '../registry-tokens/registry-tokens.service.js';

/**
 * How the control plane reaches Tern's registry for these repositories: a token it signs itself
 * under token auth, else the registry's static users (push when it writes, pull when it reads).
 */
export function ownRegistryAccess(config: TernConfig, tokens: RegistryTokens, grants: readonly RepositoryGrant[]): RegistryAccess[] {
  const r = config.registry;
  if (!r) return [];
  const token = tokens.controlPlaneToken(grants);
  const user = grants.some((g) => g.actions.includes('push')) ? r.push : r.pull;
  return [{ host: r.host, insecure: r.insecure, ...(token ? { token } : (user ?? {})) }];
}

/**
 * What the chosen builder pushes one build with, sent in its build command only: under token auth
 * a token for this build's target (pull, push) and its base when Tern's registry holds it (pull),
 * else the registry's push user (REGISTRY_PUSH_*). Undefined when the installation has neither.
 */
export function builderRegistryAccess(
  config: TernConfig,
  tokens: RegistryTokens,
  build: { target: string; base: string },
): MachineRegistryAccess | undefined {
  const r = config.registry;
  if (!r) return undefined;
  const repositoryOf = (ref: string) => parseRegistryRef(ref).repository;
  const grants: RepositoryGrant[] = [{ repository: repositoryOf(build.target), actions: ['pull', 'push'] }];
  if (parseRegistryRef(build.base).registry === r.host) grants.push({ repository: repositoryOf(build.base), actions: ['pull'] });
  const token = tokens.controlPlaneToken(grants);
  if (token) return { host: r.host, insecure: r.insecure, token };
  return r.push ? { host: r.host, insecure: r.insecure, ...r.push } : undefined;
}
