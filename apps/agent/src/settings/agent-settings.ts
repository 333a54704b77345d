import { AgentConfigError, type AgentConfigFile, CONFIG_KEYS, configPath, sha256 } from './config-file.js';

/** What the agent runs with: config.yaml with the AGENT_* environment laid over it. */
export interface AgentSettings {
  stateDir: string;
  gatewayUrl: string;
  token: string;
  /** Where the token came from, for log lines (never the token itself). */
  tokenSource: 'AGENT_TOKEN' | 'config.yaml';
  /**
   * AGENT_TOKEN when the machine token in config.yaml shadows it (see resolveSettings): tried
   * once if the gateway refuses the machine token, e.g. after the control plane's database was
   * reset while the agent kept its state. Only an operator API token can help then (the database no longer has the machine, so it is created anew).
   */
  fallbackToken?: string;
  pool: string;
  machineId?: string;
  runtime: 'runc' | 'nerdctl';
  dashboard: 'auto' | 'on' | 'off';
  network: 'private' | 'host';
  networkSubnet?: string;
  bridge?: string;
  /** The containers' DNS forwarder: `host` (the host's resolvers), `off`, or `a[:port],…`. */
  dns: string;
  userNamespaces: 'auto' | 'off';
  /** Most bytes the unpacked registry images may take. */
  imageCacheBytes: number;
  /** The machine offers building images (AGENT_BUILDER=true): it answers AGENT_IMAGE_BUILD. */
  builder: boolean;
  /** The site cache volume chunks are read through (AGENT_SITE_CACHE); undefined: straight from the store. */
  siteCache?: string;
  /** The CA pinned for the gateway's HTTPS and NATS's TLS; undefined: the system's roots, NATS as the server offers. */
  ca?: string;
}

export const ENV_KEYS = {
  AGENT_GATEWAY_URL: 'gateway',
  AGENT_TOKEN: 'token',
  POOL: 'pool',
  MACHINE_ID: 'machineId',
  AGENT_RUNTIME: 'runtime',
  AGENT_DASHBOARD: 'dashboard',
  AGENT_NETWORK: 'network',
  AGENT_NETWORK_SUBNET: 'networkSubnet',
  AGENT_BRIDGE: 'bridge',
  AGENT_DNS: 'dns',
  AGENT_USER_NAMESPACES: 'userNamespaces',
  AGENT_IMAGE_CACHE_GB: 'imageCacheGb',
  AGENT_CA_FILE: 'ca',
  AGENT_BUILDER: 'builder',
  AGENT_SITE_CACHE: 'siteCache',
} as const;

/**
 * Lays the environment over the file. One exception to "the environment wins": when
 * AGENT_TOKEN is the very join token this machine already redeemed (its sha256 is recorded in
 * the file), the machine token the gateway gave in exchange is used, because a join token
 * works once and the restarted agent would otherwise be refused.
 */
export function resolveSettings(file: AgentConfigFile | undefined, env: NodeJS.ProcessEnv, stateDir: string): AgentSettings {
  const problems: string[] = [];
  const merged: Record<string, string | undefined> = { ...(file ?? {}) };
  let tokenSource: AgentSettings['tokenSource'] = 'config.yaml';
  let fallbackToken: string | undefined;
  for (const [variable, key] of Object.entries(ENV_KEYS)) {
    const value = env[variable]?.trim();
    if (!value) continue;
    const problem = CONFIG_KEYS[key].check(value);
    if (problem) {
      problems.push(`${variable}: ${problem}`);
      continue;
    }
    if (key === 'token') {
      if (file?.token && file.replacedTokenSha256 === sha256(value)) {
        fallbackToken = value;
        continue;
      }
      tokenSource = 'AGENT_TOKEN';
    }
    merged[key] = CONFIG_KEYS[key].normalise?.(value) ?? value;
  }
  if (!merged.gateway || !merged.token) {
    problems.push(
      `no ${!merged.gateway ? 'gateway' : 'token'} configured: run \`tern-agent init --gateway URL --token TOKEN --pool POOL\` ` +
        `(writes ${configPath(stateDir)}) or set AGENT_GATEWAY_URL and AGENT_TOKEN`,
    );
  }
  if (problems.length) throw new AgentConfigError(problems);
  return {
    stateDir,
    gatewayUrl: merged.gateway!,
    token: merged.token!,
    tokenSource,
    ...(fallbackToken ? { fallbackToken } : {}),
    pool: merged.pool ?? 'default',
    machineId: merged.machineId,
    runtime: (merged.runtime as AgentSettings['runtime']) ?? 'runc',
    dashboard: (merged.dashboard as AgentSettings['dashboard']) ?? 'auto',
    network: (merged.network as AgentSettings['network']) ?? 'private',
    ...(merged.networkSubnet ? { networkSubnet: merged.networkSubnet } : {}),
    ...(merged.bridge ? { bridge: merged.bridge } : {}),
    dns: merged.dns ?? 'host',
    userNamespaces: (merged.userNamespaces as AgentSettings['userNamespaces']) ?? 'auto',
    imageCacheBytes: Math.round(Number(merged.imageCacheGb ?? 50) * 1e9),
    builder: merged.builder === 'true',
    ...(merged.siteCache ? { siteCache: merged.siteCache } : {}),
    ...(merged.ca ? { ca: merged.ca } : {}),
  };
}
