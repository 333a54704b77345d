import { accessSync, constants, statSync } from 'node:fs';
import { type ServiceName, type VariableSpec, variablesFor } from './variables.js';

/** The typed configuration a service receives after validation at boot. */
export interface TernConfig {
  readonly service: ServiceName;
  readonly nats: {
    readonly servers: string[];
    readonly namespace: string;
    /** NATS_REPLICAS: copies of every stream, KV bucket and object store the control plane declares. */
    readonly replicas: number;
    readonly user?: string;
    readonly pass?: string;
    readonly token?: string;
    /** NATS_CREDS: the service's own user (operator mode). */
    readonly credsFile?: string;
    /** Set when NATS_TLS_* are: the connection requires TLS, verified against caFile. */
    readonly tls?: { readonly caFile?: string; readonly certFile?: string; readonly keyFile?: string };
  };
  readonly database: { readonly url: string; readonly schema: string; readonly runMigrations: boolean };
  /** `tls`: the gateway serves HTTPS with this certificate and key (TLS_CERT_FILE, TLS_KEY_FILE). */
  readonly http: { readonly host: string; readonly port: number; readonly tls?: { readonly certFile: string; readonly keyFile: string } };
  /** The gateway's separate /metrics and /health listener; port 0: none, they are on `http`. */
  readonly ops: { readonly host: string; readonly port: number };
  readonly log: { readonly level: string; readonly format: 'auto' | 'json' | 'pretty' };
  readonly bootstrapAdminToken?: string;
  readonly servicePingTimeoutMs: number;
  readonly machineId?: string;
  readonly pool: string;
  readonly machines: {
    /** NATS URLs given to agents at registration. */
    readonly natsPublicUrls: string[];
    /** The gateway URL for the tern-agent init line; undefined: as the caller reached it. */
    readonly gatewayPublicUrl?: string;
    readonly joinTokenTtlSeconds: number;
    /** NATS_ACCOUNT_SIGNER: the key machine users are signed with; without it machines get no NATS user. */
    readonly natsAccountSigner?: string;
    readonly natsJwtTtlSeconds: number;
    readonly heartbeatIntervalSeconds: number;
    readonly heartbeatTtlSeconds: number;
  };
  /** SECRETS_KEY: seals workspace secrets at rest (base64 of 32 bytes); absent: no secrets. */
  readonly secretsKey?: string;
  /** The image registry (REGISTRY_URL) and its users; absent: deployments run the host image only. */
  readonly registry?: {
    readonly url: string;
    /** `host[:port]`, as image references name it. */
    readonly host: string;
    /** http:// (a loopback registry): no TLS to verify. */
    readonly insecure: boolean;
    readonly pull?: { readonly username: string; readonly password: string };
    readonly push?: { readonly username: string; readonly password: string };
    /** Token auth: the gateway signs the registry's tokens (REGISTRY_TOKEN_KEY_FILE set). */
    readonly token?: {
      readonly keyFile: string;
      readonly service: string;
      readonly issuer: string;
      readonly ttlSeconds: number;
      /** Pools whose machines may push builds. */
      readonly builderPools: readonly string[];
    };
  };
  readonly endpoints: { readonly bufferSize: number };
  readonly tasks: { readonly leaseWaitSeconds: number; readonly spotCheckMarginSeconds: number };
  /** CONTAINER_START_LIMIT_SECONDS: a container not ready this long after its placement is failed by the scheduler. */
  readonly containers: {
    readonly startLimitSeconds: number;
    /** CONTAINER_CRASH_BACKOFF_*: the wait between starts of a crash-looping version. */
    readonly crashBackoff: { readonly firstMs: number; readonly maxMs: number };
  };
  /** MACHINE_CHALLENGE_INTERVAL_SECONDS: the mean time between two hardware challenges of a machine. */
  readonly verification: { readonly challengeIntervalSeconds: number };
  /** Log streams one API token may hold open at once (per gateway). */
  readonly logs: { readonly followsPerToken: number };
  /** Per workspace, over all its volumes. */
  readonly volumes: { readonly quotaBytes: number; readonly quotaFiles: number };
  readonly metering: { readonly checkpointIntervalMs: number };
  readonly reputation: { readonly recomputeIntervalMs: number; readonly historyIntervalSeconds: number; readonly halfLifeHours: number };
  readonly agent: {
    readonly stateDir?: string;
    readonly gatewayUrl?: string;
    readonly token?: string;
    readonly runtime: 'runc' | 'nerdctl';
    readonly volumeCacheBytes: number;
    readonly dashboard: 'auto' | 'on' | 'off';
  };
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  ${problems.join('\n  ')}`);
    this.name = 'ConfigError';
  }
}

type Raw = Record<string, string | number | boolean | undefined>;

const NAMESPACE = /^[A-Za-z0-9_-]+$/;

/**
 * Secrets that shipped in docker-compose.yml and k8s/ at some point (and any "change me"): a
 * service refuses to start with one, since everyone knows them. Kept to what Tern published,
 * so a developer's own local database password is not second-guessed.
 */
export const PLACEHOLDER_SECRETS: readonly string[] = ['tern_insecure-default-admin-token-change-me', 'change-me', 'changeme', 'tern'];

export function isPlaceholderSecret(value: string): boolean {
  const v = value.trim().toLowerCase();
  return PLACEHOLDER_SECRETS.includes(v) || v.includes('change-me') || v.includes('changeme');
}

const TOKEN_ADVICE = 'set it to a random secret, e.g. tern_$(openssl rand -base64 32 | tr "+/" "-_" | tr -d =)';

/** The known-placeholder check on the secrets a service reads: the bootstrap token, the agent's token, the database password. */
function placeholderProblems(raw: Raw): string[] {
  const problems: string[] = [];
  for (const name of ['BOOTSTRAP_ADMIN_TOKEN', 'AGENT_TOKEN'] as const) {
    const value = raw[name];
    if (typeof value === 'string' && isPlaceholderSecret(value)) problems.push(`${name} is a published placeholder: ${TOKEN_ADVICE}`);
  }
  if (typeof raw.DATABASE_URL === 'string') {
    const password = databasePassword(raw.DATABASE_URL);
    if (password !== undefined && isPlaceholderSecret(password)) {
      problems.push(
        'DATABASE_URL: its password is a published placeholder: set the database password to a random secret, e.g. openssl rand -hex 32',
      );
    }
  }
  return problems;
}

function databasePassword(url: string): string | undefined {
  try {
    const password = new URL(url).password;
    return password ? decodeURIComponent(password) : undefined;
  } catch {
    return undefined;
  }
}

function splitList(text: string): string[] {
  return text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

function parseOne(spec: VariableSpec, service: ServiceName, env: NodeJS.ProcessEnv, problems: string[]) {
  const given = env[spec.name];
  const text = given !== undefined && given !== '' ? given : (spec.serviceDefaults?.[service] ?? spec.default);
  if (text === undefined) return undefined;
  const fail = (rule: string) => {
    problems.push(`${spec.name}=${JSON.stringify(text)}: ${rule}`);
    return undefined;
  };
  switch (spec.kind) {
    case 'int': {
      if (!/^-?\d+$/.test(text.trim())) return fail('must be a whole number');
      const n = Number(text);
      if (spec.min !== undefined && n < spec.min) return fail(`must be at least ${spec.min}`);
      if (spec.max !== undefined && n > spec.max) return fail(`must be at most ${spec.max}`);
      return n;
    }
    case 'bool': {
      const t = text.trim().toLowerCase();
      if (['true', '1', 'yes', 'on'].includes(t)) return true;
      if (['false', '0', 'no', 'off'].includes(t)) return false;
      return fail('must be true or false');
    }
    case 'enum':
      return spec.values?.includes(text) ? text : fail(`must be one of ${spec.values?.join(', ')}`);
    case 'file':
      try {
        if (!statSync(text).isFile()) return fail('is not a file');
        accessSync(text, constants.R_OK);
        return text;
      } catch (e) {
        return fail(`cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
      }
    case 'url':
      try {
        new URL(text);
        return text;
      } catch {
        return fail('must be a URL such as postgres://user@host:5432/db');
      }
    default:
      return text;
  }
}

/** Reads, validates and types the configuration of one service. Throws ConfigError listing every problem. */
export function loadConfig(service: ServiceName, env: NodeJS.ProcessEnv = process.env): TernConfig {
  const problems: string[] = [];
  const raw: Raw = {};
  for (const spec of variablesFor(service)) raw[spec.name] = parseOne(spec, service, env, problems);
  problems.push(...problemsBetween(raw, env));
  if (problems.length) throw new ConfigError(problems);
  return typed(service, raw, env);
}

/** What no one variable shows: the shapes of a few values, and the halves of a certificate pair. */
function problemsBetween(raw: Raw, env: NodeJS.ProcessEnv): string[] {
  const problems: string[] = [];
  const namespace = String(raw.NATS_NAMESPACE);
  if (!NAMESPACE.test(namespace)) problems.push(`NATS_NAMESPACE=${JSON.stringify(namespace)}: letters, digits, - and _ only`);
  const schema = String(raw.DATABASE_SCHEMA ?? 'public');
  if (!/^[a-z_][a-z0-9_]*$/.test(schema)) problems.push(`DATABASE_SCHEMA=${JSON.stringify(schema)}: lower-case letters, digits and _ only`);
  problems.push(...placeholderProblems(raw));
  if (typeof raw.SECRETS_KEY === 'string' && !/^[A-Za-z0-9+/]{43}=$/.test(raw.SECRETS_KEY))
    problems.push('SECRETS_KEY must be 32 random bytes in base64: set it to a random secret, e.g. openssl rand -base64 32');
  for (const [cert, key] of [
    ['TLS_CERT_FILE', 'TLS_KEY_FILE'],
    ['NATS_TLS_CERT_FILE', 'NATS_TLS_KEY_FILE'],
  ] as const) {
    // Only where this service reads the pair, and whatever parseOne thought of each file.
    const given = (name: string) => name in raw && !!env[name];
    if (given(cert) && !given(key)) problems.push(`${cert} is set but ${key} is not: give the certificate's private key too`);
    if (given(key) && !given(cert)) problems.push(`${key} is set but ${cert} is not: give the certificate too`);
  }
  return problems;
}

/** The configuration as the services read it, from variables that passed their checks. */
function typed(service: ServiceName, raw: Raw, env: NodeJS.ProcessEnv): TernConfig {
  const namespace = String(raw.NATS_NAMESPACE);
  const schema = String(raw.DATABASE_SCHEMA ?? 'public');
  return {
    service,
    nats: {
      servers: splitList(String(raw.NATS_URL)),
      namespace,
      replicas: Number(raw.NATS_REPLICAS ?? 1),
      user: raw.NATS_USER as string | undefined,
      pass: raw.NATS_PASSWORD as string | undefined,
      token: raw.NATS_TOKEN as string | undefined,
      credsFile: raw.NATS_CREDS as string | undefined,
      ...(raw.NATS_TLS_CA_FILE || raw.NATS_TLS_CERT_FILE
        ? {
            tls: {
              caFile: raw.NATS_TLS_CA_FILE as string | undefined,
              certFile: raw.NATS_TLS_CERT_FILE as string | undefined,
              keyFile: raw.NATS_TLS_KEY_FILE as string | undefined,
            },
          }
        : {}),
    },
    database: {
      url: String(raw.DATABASE_URL ?? env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/tern'),
      schema,
      runMigrations: raw.DATABASE_RUN_MIGRATIONS !== false,
    },
    http: {
      host: String(raw.HTTP_HOST),
      port: Number(raw.HTTP_PORT),
      ...(raw.TLS_CERT_FILE && raw.TLS_KEY_FILE ? { tls: { certFile: String(raw.TLS_CERT_FILE), keyFile: String(raw.TLS_KEY_FILE) } } : {}),
    },
    ops: { host: String(raw.OPS_HOST ?? '127.0.0.1'), port: Number(raw.OPS_PORT ?? 0) },
    log: { level: String(raw.LOG_LEVEL), format: raw.LOG_FORMAT as TernConfig['log']['format'] },
    bootstrapAdminToken: raw.BOOTSTRAP_ADMIN_TOKEN as string | undefined,
    servicePingTimeoutMs: Number(raw.SERVICE_PING_TIMEOUT_MS ?? 500),
    machineId: raw.MACHINE_ID as string | undefined,
    pool: String(raw.POOL ?? 'default'),
    machines: {
      natsPublicUrls: splitList(String(raw.NATS_PUBLIC_URL ?? raw.NATS_URL)),
      gatewayPublicUrl: (raw.GATEWAY_PUBLIC_URL as string | undefined)?.replace(/\/+$/, ''),
      joinTokenTtlSeconds: Number(raw.MACHINE_JOIN_TOKEN_TTL_SECONDS ?? 86400),
      natsAccountSigner: raw.NATS_ACCOUNT_SIGNER as string | undefined,
      natsJwtTtlSeconds: Number(raw.MACHINE_NATS_JWT_TTL_SECONDS ?? 14400),
      heartbeatIntervalSeconds: Number(raw.MACHINE_HEARTBEAT_INTERVAL_SECONDS ?? 10),
      heartbeatTtlSeconds: Number(raw.MACHINE_HEARTBEAT_TTL_SECONDS ?? 30),
    },
    ...(raw.SECRETS_KEY ? { secretsKey: String(raw.SECRETS_KEY) } : {}),
    ...(raw.REGISTRY_URL ? { registry: registryConfig(raw) } : {}),
    endpoints: { bufferSize: Number(raw.ENDPOINT_BUFFER_SIZE ?? 1000) },
    tasks: tasksConfig(raw),
    containers: {
      startLimitSeconds: Number(raw.CONTAINER_START_LIMIT_SECONDS ?? 300),
      crashBackoff: {
        firstMs: Number(raw.CONTAINER_CRASH_BACKOFF_FIRST_MS ?? 1000),
        maxMs: Number(raw.CONTAINER_CRASH_BACKOFF_MAX_MS ?? 300_000),
      },
    },
    verification: { challengeIntervalSeconds: Number(raw.MACHINE_CHALLENGE_INTERVAL_SECONDS ?? 21600) },
    logs: { followsPerToken: Number(raw.LOG_FOLLOWS_PER_TOKEN ?? 4) },
    volumes: { quotaBytes: Number(raw.VOLUME_QUOTA_BYTES ?? 100 * 2 ** 30), quotaFiles: Number(raw.VOLUME_QUOTA_FILES ?? 1_000_000) },
    metering: { checkpointIntervalMs: Number(raw.METERING_CHECKPOINT_INTERVAL_MS ?? 5000) },
    reputation: {
      recomputeIntervalMs: Number(raw.REPUTATION_RECOMPUTE_INTERVAL_MS ?? 5000),
      historyIntervalSeconds: Number(raw.REPUTATION_HISTORY_INTERVAL_SECONDS ?? 900),
      halfLifeHours: Number(raw.REPUTATION_HALF_LIFE_HOURS ?? 84),
    },
    agent: {
      stateDir: raw.AGENT_STATE_DIR as string | undefined,
      gatewayUrl: raw.AGENT_GATEWAY_URL as string | undefined,
      token: raw.AGENT_TOKEN as string | undefined,
      runtime: (raw.AGENT_RUNTIME ?? 'runc') as 'runc' | 'nerdctl',
      volumeCacheBytes: Number(raw.AGENT_VOLUME_CACHE_BYTES ?? 20 * 2 ** 30),
      dashboard: (raw.AGENT_DASHBOARD ?? 'auto') as 'auto' | 'on' | 'off',
    },
  };
}

function tasksConfig(raw: Record<string, unknown>): TernConfig['tasks'] {
  return {
    leaseWaitSeconds: Number(raw.TASK_LEASE_WAIT_SECONDS ?? 300),
    spotCheckMarginSeconds: Number(raw.SPOT_CHECK_MARGIN_SECONDS ?? 120),
  };
}

function registryConfig(raw: Record<string, unknown>): NonNullable<TernConfig['registry']> {
  const url = new URL(String(raw.REGISTRY_URL));
  const user = (role: 'PULL' | 'PUSH') =>
    raw[`REGISTRY_${role}_USERNAME`]
      ? { username: String(raw[`REGISTRY_${role}_USERNAME`]), password: String(raw[`REGISTRY_${role}_PASSWORD`] ?? '') }
      : undefined;
  const pull = user('PULL');
  const push = user('PUSH');
  return {
    url: url.href.replace(/\/+$/, ''),
    host: url.host,
    insecure: url.protocol === 'http:',
    ...(pull ? { pull } : {}),
    ...(push ? { push } : {}),
    ...(raw.REGISTRY_TOKEN_KEY_FILE
      ? {
          token: {
            keyFile: String(raw.REGISTRY_TOKEN_KEY_FILE),
            service: String(raw.REGISTRY_TOKEN_SERVICE),
            issuer: String(raw.REGISTRY_TOKEN_ISSUER),
            ttlSeconds: Number(raw.REGISTRY_TOKEN_TTL_SECONDS),
            builderPools: splitList(String(raw.REGISTRY_BUILDER_POOLS ?? '')),
          },
        }
      : {}),
  };
}
