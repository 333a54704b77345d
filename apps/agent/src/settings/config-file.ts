import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseDocument, stringify } from 'yaml';
import { ID_PATTERN, ipv4CidrProblem } from '#tern/contracts';
import { parseUpstream } from '#tern/runtime';
import { caProblem } from './ca-file.js';

/**
 * `<state dir>/config.yaml`, written by `tern-agent init` and read by `tern-agent`. Plain
 * functions over plain objects, so every rule is unit-tested without a process around it.
 */
export interface AgentConfigFile {
  /** Base URL of the gateway, e.g. https://tern.example.com. */
  gateway: string;
  /** Join token, operator API token, or (after the first registration) this machine's own token. */
  token: string;
  pool: string;
  machineId?: string;
  runtime?: 'runc' | 'nerdctl';
  dashboard?: 'auto' | 'on' | 'off';
  /** `private` (default): each container in its own network namespace on the agent's bridge; `host`: the machine's. */
  network?: 'private' | 'host';
  /** The containers' IPv4 range on the bridge (default 10.213.0.0/16). */
  networkSubnet?: string;
  /** The bridge the agent owns (default tern0). */
  bridge?: string;
  /** What containers' DNS forwarder asks: `host` (default, the host's resolv.conf), `off`, or resolvers `a[:port],…`. */
  dns?: string;
  /** `auto` (default): containers in user namespaces where the kernel allows; `off`: never. */
  userNamespaces?: 'auto' | 'off';
  /** Most GB the unpacked registry images may take (default 50): least recently used ones not in use go first. */
  imageCacheGb?: string;
  /** `true`: this machine builds images for the control plane (it is handed the registry's push user per build). */
  builder?: string;
  /** `http://host:port` of this machine's site cache (`tern-agent site-cache`): volume chunks are read through it. */
  siteCache?: string;
  /** PEM file of the CA the agent pins for the gateway's HTTPS and NATS's TLS (tern-agent init --ca). */
  ca?: string;
  /**
   * sha256 of the join (or admin) token that `token` replaced at the first registration, so
   * an AGENT_TOKEN still holding that spent token does not shadow the machine token.
   */
  replacedTokenSha256?: string;
}

export type ConfigKey = keyof AgentConfigFile;

export class AgentConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(problems.join('\n'));
    this.name = 'AgentConfigError';
  }
}

interface KeySpec {
  required: boolean;
  /** Shown by `config set` for a bad value; undefined means the value is fine. */
  check(value: string): string | undefined;
  /** Normal form stored in the file. */
  normalise?(value: string): string;
  description: string;
  /** Written by the agent itself, not by `config set`. */
  internal?: boolean;
}

const POOL_PATTERN = /^[A-Za-z0-9_-]{1,63}$/;

export function checkGatewayUrl(value: string): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return `"${value}" is not a URL; give the gateway's address such as https://tern.example.com or http://127.0.0.1:1994`;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return `"${value}" must start with http:// or https:// (got ${url.protocol}//)`;
  }
  if (url.search || url.hash) return `"${value}" must not carry a query or fragment`;
  return undefined;
}

export const CONFIG_KEYS: Record<ConfigKey, KeySpec> = {
  gateway: {
    required: true,
    check: checkGatewayUrl,
    normalise: (v) => v.trim().replace(/\/+$/, ''),
    description: 'gateway URL the agent registers with',
  },
  token: {
    required: true,
    check: (v) => (/^\S+$/.test(v) ? undefined : 'the token must be one word with no spaces'),
    description: "join token (tern machine create), operator API token, or this machine's token",
  },
  pool: {
    required: true,
    check: (v) => (POOL_PATTERN.test(v) ? undefined : `pool "${v}" must be 1-63 letters, digits, - or _`),
    description: 'pool the machine joins',
  },
  machineId: {
    required: false,
    check: (v) => (ID_PATTERN.test(v) ? undefined : `machine id "${v}" must be 1-64 letters, digits, - or _`),
    description: 'machine id (default: the id the gateway assigns, or one derived from the host name)',
  },
  runtime: {
    required: false,
    check: (v) => (['runc', 'nerdctl'].includes(v) ? undefined : `runtime must be runc or nerdctl, not "${v}"`),
    description: 'container runtime',
  },
  dashboard: {
    required: false,
    check: (v) => (['auto', 'on', 'off'].includes(v) ? undefined : `dashboard must be auto, on or off, not "${v}"`),
    description: 'terminal dashboard: auto shows it on a TTY',
  },
  network: {
    required: false,
    check: (v) => (['private', 'host'].includes(v) ? undefined : `network must be private or host, not "${v}"`),
    description:
      "containers' network: private (default; own namespace on the agent's bridge, NAT, public internet only) or host (the machine's own, for hosts that cannot run the bridge: no isolation)",
  },
  networkSubnet: {
    required: false,
    check: (v) => {
      const problem = ipv4CidrProblem(v);
      if (problem) return `networkSubnet: ${problem}`;
      const prefix = Number(v.split('/')[1] ?? 32);
      return prefix >= 8 && prefix <= 24 ? undefined : `networkSubnet ${v} must be a /8 to a /24`;
    },
    description: "containers' IPv4 range on the bridge (default 10.213.0.0/16)",
  },
  bridge: {
    required: false,
    check: (v) => (/^[A-Za-z0-9][A-Za-z0-9_.-]{0,14}$/.test(v) ? undefined : `bridge "${v}" must be 1-15 letters, digits, _ . -`),
    description: 'the bridge the agent owns for private container networks (default tern0)',
  },
  dns: {
    required: false,
    check: (v) => {
      if (v === 'host' || v === 'off') return undefined;
      const bad = v.split(',').find((r) => !parseUpstream(r.trim()));
      return bad === undefined ? undefined : `dns must be host, off or resolver addresses (a[:port],…), not "${bad}"`;
    },
    description:
      "what the private network's DNS forwarder asks: host (default; the resolvers in the host's /etc/resolv.conf), off (containers get the host's resolv.conf), or resolvers such as 1.1.1.1,9.9.9.9:53",
  },
  userNamespaces: {
    required: false,
    check: (v) => (['auto', 'off'].includes(v) ? undefined : `userNamespaces must be auto or off, not "${v}"`),
    description: "auto (default): container root is an unprivileged host user where the kernel allows; off: the host's ids",
  },
  imageCacheGb: {
    required: false,
    check: (v) => (/^\d+(\.\d+)?$/.test(v) && Number(v) > 0 ? undefined : `imageCacheGb must be a positive number of GB, not "${v}"`),
    description: 'most GB the unpacked registry images may take (default 50); least recently used ones not in use are removed first',
  },
  builder: {
    required: false,
    check: (v) => (['true', 'false'].includes(v) ? undefined : `builder must be true or false, not "${v}"`),
    description: "true: this machine builds images from deployments' image specs (runc, umoci, skopeo and outbound network needed)",
  },
  siteCache: {
    required: false,
    check: (v) =>
      /^https?:\/\/[^/\s]+\/?$/.test(v) ? undefined : `siteCache must be http(s)://host[:port] (a \`tern-agent site-cache\`), not "${v}"`,
    normalise: (v) => v.trim().replace(/\/+$/, ''),
    description:
      "http(s)://host:port of the site's cache (tern-agent site-cache on a machine of this site): volume chunks are read through it, so the site's uplink carries each once",
  },
  ca: {
    required: false,
    check: (v) => caProblem(v),
    normalise: (v) => resolve(v.trim()),
    description: "CA certificate (PEM) pinned for the gateway's HTTPS and NATS's TLS",
  },
  replacedTokenSha256: {
    required: false,
    internal: true,
    check: (v) => (/^[0-9a-f]{64}$/.test(v) ? undefined : 'must be a sha256 in hex'),
    description: 'sha256 of the spent join token (written by the agent)',
  },
};

export function isConfigKey(key: string): key is ConfigKey {
  return Object.hasOwn(CONFIG_KEYS, key);
}

/** Checks a whole config object; every problem is listed, not just the first. */
export function validateConfig(raw: unknown, source = 'config.yaml'): AgentConfigFile {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    throw new AgentConfigError([`${source}: expected a mapping of keys to values`]);
  }
  const problems: string[] = [];
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(raw as Record<string, unknown>)) {
    if (!isConfigKey(key)) {
      problems.push(
        `${source}: unknown key "${key}" (known: ${Object.keys(CONFIG_KEYS)
          .filter((k) => !CONFIG_KEYS[k as ConfigKey].internal)
          .join(', ')})`,
      );
      continue;
    }
    if (value === null || value === undefined) continue;
    // `builder: true` reads as a boolean in YAML: taken as its word.
    if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') {
      problems.push(`${source}: ${key} must be a string`);
      continue;
    }
    const text = String(value);
    const spec = CONFIG_KEYS[key];
    const problem = spec.check(text);
    if (problem) problems.push(`${source}: ${key}: ${problem}`);
    else out[key] = spec.normalise ? spec.normalise(text) : text;
  }
  for (const [key, spec] of Object.entries(CONFIG_KEYS)) {
    if (spec.required && !(key in out) && !problems.some((p) => p.includes(`: ${key}:`))) {
      problems.push(`${source}: ${key} is missing (${spec.description})`);
    }
  }
  if (problems.length) throw new AgentConfigError(problems);
  return out as unknown as AgentConfigFile;
}

/** Parses the YAML text of config.yaml; syntax errors name the line. */
export function parseConfigYaml(text: string, source = 'config.yaml'): AgentConfigFile {
  const doc = parseDocument(text);
  if (doc.errors.length) {
    throw new AgentConfigError(doc.errors.map((e) => `${source}: ${e.message.split('\n')[0]}`));
  }
  return validateConfig(doc.toJS() ?? {}, source);
}

const HEADER = [
  '# Tern agent configuration, written by `tern-agent init` (edit with `tern-agent config set`).',
  '# Environment variables override it: AGENT_GATEWAY_URL, AGENT_TOKEN, POOL, MACHINE_ID,',
  "# AGENT_RUNTIME, AGENT_DASHBOARD, AGENT_CA_FILE. Keep this file private: it holds the machine's token.",
  '',
].join('\n');

export function renderConfigYaml(config: AgentConfigFile): string {
  const ordered: Record<string, string> = {};
  for (const key of Object.keys(CONFIG_KEYS) as ConfigKey[]) {
    const v = config[key];
    if (v !== undefined) ordered[key] = v;
  }
  return HEADER + stringify(ordered);
}

/** A token as `config show` prints it: enough to tell tokens apart, never enough to use one. */
export function maskToken(token: string): string {
  if (token.length <= 12) return '*'.repeat(token.length);
  return `${token.slice(0, 8)}…${token.slice(-4)}`;
}

export function showConfig(config: AgentConfigFile): string {
  const shown: Record<string, string> = {};
  for (const key of Object.keys(CONFIG_KEYS) as ConfigKey[]) {
    const v = config[key];
    if (v === undefined || CONFIG_KEYS[key].internal) continue;
    shown[key] = key === 'token' ? maskToken(v) : v;
  }
  return stringify(shown);
}

/** `config set key value`: returns the new config or throws with what is wrong. */
export function setConfigValue(config: AgentConfigFile, key: string, value: string): AgentConfigFile {
  if (!isConfigKey(key) || CONFIG_KEYS[key].internal) {
    const known = Object.keys(CONFIG_KEYS).filter((k) => !CONFIG_KEYS[k as ConfigKey].internal);
    throw new AgentConfigError([`unknown key "${key}"; one of ${known.join(', ')}`]);
  }
  const next: Record<string, string | undefined> = { ...config };
  if (value === '' && !CONFIG_KEYS[key].required) delete next[key];
  else next[key] = value;
  // A token set by hand is a fresh credential: forget which one the agent replaced.
  if (key === 'token') delete next.replacedTokenSha256;
  return validateConfig(next, 'value');
}

export function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

// --- files -------------------------------------------------------------------------------

export function defaultStateDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.AGENT_STATE_DIR || join(env.HOME || homedir(), '.tern-agent');
}

export function configPath(stateDir: string): string {
  return join(resolve(stateDir), 'config.yaml');
}

export function readConfigFile(stateDir: string): AgentConfigFile | undefined {
  const path = configPath(stateDir);
  if (!existsSync(path)) return undefined;
  return parseConfigYaml(readFileSync(path, 'utf8'), path);
}

/** Writes config.yaml atomically with mode 600 (the directory 700): it holds a credential. */
export function writeConfigFile(stateDir: string, config: AgentConfigFile): string {
  const dir = resolve(stateDir);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const path = configPath(dir);
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, renderConfigYaml(config), { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, path);
  return path;
}
