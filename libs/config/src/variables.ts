/**
 * Every environment variable Tern reads, with its default. This is the one place to look:
 * the README's configuration table, docker-compose.yml and k8s/ are checked against it by tests.
 */
export type ServiceName = 'gateway' | 'scheduler' | 'autoscaler' | 'metering' | 'reputation' | 'agent';

export const SERVICE_NAMES: readonly ServiceName[] = ['gateway', 'scheduler', 'autoscaler', 'metering', 'reputation', 'agent'];

/** `file`: a path that must name a readable file when set (certificates, keys). */
export type VariableKind = 'string' | 'url' | 'int' | 'bool' | 'enum' | 'file';

export interface VariableSpec {
  readonly name: string;
  readonly kind: VariableKind;
  /** Default as the string a user would write; undefined means "not set". */
  readonly default?: string;
  /** Per-service defaults, where one default does not fit all. */
  readonly serviceDefaults?: Partial<Record<ServiceName, string>>;
  readonly values?: readonly string[];
  readonly min?: number;
  readonly max?: number;
  readonly services: readonly ServiceName[] | 'all';
  readonly description: string;
}

const CONTROL_PLANE: readonly ServiceName[] = ['gateway', 'scheduler', 'autoscaler', 'metering', 'reputation'];
const WITH_DATABASE: readonly ServiceName[] = ['gateway', 'scheduler', 'metering', 'reputation'];

export const VARIABLES = [
  {
    name: 'NATS_URL',
    kind: 'string',
    default: 'nats://127.0.0.1:4222',
    services: 'all',
    description: 'NATS server(s) with JetStream, comma-separated.',
  },
  {
    name: 'NATS_NAMESPACE',
    kind: 'string',
    default: 'tern',
    services: 'all',
    description:
      'First token of every subject, stream, KV bucket and service name. Several Tern installations (or test runs) can share one NATS server under different namespaces.',
  },
  {
    name: 'NATS_REPLICAS',
    kind: 'int',
    default: '1',
    min: 1,
    max: 5,
    services: CONTROL_PLANE,
    description:
      'Copies JetStream keeps of every stream, KV bucket and object store the control plane declares: 1 on one NATS server, 3 in a cluster of three or more (a stream then survives the loss of one server). A stream declared with fewer is raised at the next start; KV buckets and object stores keep the count they were created with.',
  },
  {
    name: 'NATS_USER',
    kind: 'string',
    services: 'all',
    description: 'NATS user name, when the server requires one.',
  },
  {
    name: 'NATS_PASSWORD',
    kind: 'string',
    services: 'all',
    description: 'NATS password, when the server requires one.',
  },
  {
    name: 'NATS_CREDS',
    kind: 'string',
    services: 'all',
    description:
      "Path of this service's NATS .creds file (user JWT and seed) when NATS runs in operator mode; `npm run up` writes one per service under .tern/nats/creds/. Agents get theirs at registration instead.",
  },
  {
    name: 'NATS_TOKEN',
    kind: 'string',
    services: 'all',
    description: 'NATS auth token, when the server requires one.',
  },
  {
    name: 'DATABASE_URL',
    kind: 'url',
    default: 'postgres://postgres@127.0.0.1:5432/tern',
    services: WITH_DATABASE,
    description: 'PostgreSQL connection string.',
  },
  {
    name: 'DATABASE_SCHEMA',
    kind: 'string',
    default: 'public',
    services: WITH_DATABASE,
    description: 'PostgreSQL schema holding Tern tables (created when missing).',
  },
  {
    name: 'DATABASE_RUN_MIGRATIONS',
    kind: 'bool',
    default: 'true',
    services: WITH_DATABASE,
    description: 'Run pending migrations at start (serialised by an advisory lock, safe with many replicas).',
  },
  {
    name: 'HTTP_HOST',
    kind: 'string',
    default: '0.0.0.0',
    services: 'all',
    description: 'Address the HTTP server binds (the API on the gateway; health and metrics elsewhere).',
  },
  {
    name: 'HTTP_PORT',
    kind: 'int',
    min: 0,
    max: 65535,
    serviceDefaults: {
      gateway: '1994',
      scheduler: '1995',
      autoscaler: '1996',
      metering: '1997',
      reputation: '1998',
      agent: '0',
    },
    services: 'all',
    description: 'HTTP port: the public API on the gateway, /health and /metrics on the others. 0 on the agent turns its endpoint off.',
  },
  {
    name: 'OPS_PORT',
    kind: 'int',
    default: '0',
    min: 0,
    max: 65535,
    services: ['gateway'],
    description:
      'When set, the gateway serves /metrics and /health/* only on this port (at OPS_HOST), not on its public API listener. 0: they stay on HTTP_HOST:HTTP_PORT (the other services have no public API: HTTP_HOST is their metrics and health address).',
  },
  {
    name: 'OPS_HOST',
    kind: 'string',
    default: '127.0.0.1',
    services: ['gateway'],
    description: 'Address the ops listener (OPS_PORT) binds: loopback unless the operator chooses another.',
  },
  {
    name: 'LOG_LEVEL',
    kind: 'enum',
    default: 'info',
    values: ['trace', 'debug', 'info', 'warn', 'error', 'fatal'],
    services: 'all',
    description: 'Lowest log level written.',
  },
  {
    name: 'LOG_FORMAT',
    kind: 'enum',
    default: 'auto',
    values: ['auto', 'json', 'pretty'],
    services: 'all',
    description: 'json: one JSON object per line; pretty: readable; auto: pretty on a TTY, json otherwise.',
  },
  {
    name: 'BOOTSTRAP_ADMIN_TOKEN',
    kind: 'string',
    services: ['gateway'],
    description:
      'The platform operator token (the name is historical): the gateway makes sure the "default" workspace exists and accepts this token with the operator role (stored hashed).',
  },
  {
    name: 'SERVICE_PING_TIMEOUT_MS',
    kind: 'int',
    default: '500',
    min: 50,
    max: 10000,
    services: ['gateway'],
    description: 'How long /health/ready waits for services to answer their NATS ping.',
  },
  {
    name: 'NATS_TLS_CA_FILE',
    kind: 'file',
    services: 'all',
    description:
      "PEM file of the CA that signed the NATS server's certificate: the connection requires TLS and trusts only this CA (the agent takes it from tern-agent init --ca instead).",
  },
  {
    name: 'NATS_TLS_CERT_FILE',
    kind: 'file',
    services: 'all',
    description: 'Client certificate (PEM) for NATS servers that verify clients (tls { verify: true }); with NATS_TLS_KEY_FILE.',
  },
  {
    name: 'NATS_TLS_KEY_FILE',
    kind: 'file',
    services: 'all',
    description: "The client certificate's private key (PEM).",
  },
  {
    name: 'TLS_CERT_FILE',
    kind: 'file',
    services: ['gateway'],
    description: 'Certificate chain (PEM) for the gateway: with TLS_KEY_FILE it serves HTTPS instead of HTTP on HTTP_HOST:HTTP_PORT.',
  },
  {
    name: 'TLS_KEY_FILE',
    kind: 'file',
    services: ['gateway'],
    description: "The gateway certificate's private key (PEM).",
  },
  {
    name: 'NATS_PUBLIC_URL',
    kind: 'string',
    services: ['gateway'],
    description: 'NATS URL(s) handed to agents when they register (what a worker can reach); defaults to NATS_URL.',
  },
  {
    name: 'GATEWAY_PUBLIC_URL',
    kind: 'url',
    services: ['gateway'],
    description:
      'The gateway URL machines elsewhere reach (printed in the tern-agent init line of tern machine create); default: the URL the caller used (proxy headers, Host). npm run up --public sets it.',
  },
  {
    name: 'REGISTRY_URL',
    kind: 'url',
    services: ['gateway'],
    description:
      'The OCI registry images live in (http:// only on loopback or a trusted network); npm run up starts a private one under .tern/registry/ when unset. The gateway pins tags to digests there and hands machines its users at registration.',
  },
  {
    name: 'REGISTRY_PULL_USERNAME',
    kind: 'string',
    services: ['gateway'],
    description: 'Registry user handed to every machine at registration (pull).',
  },
  {
    name: 'REGISTRY_PULL_PASSWORD',
    kind: 'string',
    services: ['gateway'],
    description: 'Password of REGISTRY_PULL_USERNAME.',
  },
  {
    name: 'REGISTRY_PUSH_USERNAME',
    kind: 'string',
    services: ['gateway'],
    description: 'Registry user for builders and `tern image base` (push); never handed to a machine that does not build.',
  },
  {
    name: 'REGISTRY_PUSH_PASSWORD',
    kind: 'string',
    services: ['gateway'],
    description: 'Password of REGISTRY_PUSH_USERNAME.',
  },
  {
    name: 'SECRETS_KEY',
    kind: 'string',
    services: ['gateway'],
    description:
      'Workspace secrets (tern secret set) are sealed at rest with this key: 32 bytes in base64 (openssl rand -base64 32). Unset: the secrets API answers 503. npm run up makes one in .tern/credentials.json.',
  },
  {
    name: 'REGISTRY_TOKEN_KEY_FILE',
    kind: 'file',
    services: ['gateway'],
    description:
      "EC P-256 private key (PEM) the gateway signs registry tokens with: set, the gateway is the registry's token service (GET /api/v1/registry/token) and machines pull with their machine token instead of REGISTRY_PULL_*; the registry trusts the key's certificate (auth.token.rootcertbundle). npm run up sets it for its private registry.",
  },
  {
    name: 'REGISTRY_TOKEN_SERVICE',
    kind: 'string',
    default: 'tern-registry',
    services: ['gateway'],
    description: "The registry's auth.token.service: the audience of the tokens the gateway signs.",
  },
  {
    name: 'REGISTRY_TOKEN_ISSUER',
    kind: 'string',
    default: 'tern',
    services: ['gateway'],
    description: "The registry's auth.token.issuer: the issuer of the tokens the gateway signs.",
  },
  {
    name: 'REGISTRY_TOKEN_TTL_SECONDS',
    kind: 'int',
    default: '300',
    min: 30,
    max: 3600,
    services: ['gateway'],
    description: 'How long a registry token lives (clients ask again for each pull or push that outlasts it).',
  },
  {
    name: 'REGISTRY_BUILDER_POOLS',
    kind: 'string',
    services: ['gateway'],
    description:
      'Comma-separated pools whose machines build images: their registry tokens may push builds/*; every other machine may only pull the images of containers placed on it.',
  },
  {
    name: 'MACHINE_JOIN_TOKEN_TTL_SECONDS',
    kind: 'int',
    default: '86400',
    min: 60,
    services: ['gateway'],
    description: 'How long a join token from `tern machine create` stays valid if unused.',
  },
  {
    name: 'NATS_ACCOUNT_SIGNER',
    kind: 'string',
    services: ['gateway'],
    description:
      "Path of the NATS account signer file (`npm run up` writes .tern/nats/signer.json): the Tern account's signing key, with which the gateway issues each machine its own short-lived NATS user at registration, and the operator's signing key and a system-account user, with which it revokes a deleted or revoked machine's user.",
  },
  {
    name: 'MACHINE_NATS_JWT_TTL_SECONDS',
    kind: 'int',
    default: '14400',
    min: 10,
    services: ['gateway'],
    description:
      "Lifetime of a machine's NATS user JWT; the agent renews it over HTTPS with its machine token at two thirds of it. Its task permits (the NATS users that may pull one task-queue version placed on it) live the lesser of this and 15 minutes.",
  },
  {
    name: 'MACHINE_HEARTBEAT_INTERVAL_SECONDS',
    kind: 'int',
    default: '10',
    min: 1,
    max: 300,
    services: ['gateway', 'scheduler', 'reputation'],
    description: 'How often agents send a heartbeat (told to each agent when it registers).',
  },
  {
    name: 'MACHINE_HEARTBEAT_TTL_SECONDS',
    kind: 'int',
    default: '30',
    min: 2,
    max: 3600,
    services: ['gateway', 'scheduler', 'metering'],
    description:
      'A machine with no heartbeat for this long is marked offline (metering ends the usage of its containers this long before the scheduler gave up, at the last heartbeat).',
  },
  {
    name: 'REPUTATION_RECOMPUTE_INTERVAL_MS',
    kind: 'int',
    default: '5000',
    min: 100,
    max: 600000,
    services: ['reputation'],
    description: "How often every machine's reputation is recomputed (also shortly after each event).",
  },
  {
    name: 'REPUTATION_HISTORY_INTERVAL_SECONDS',
    kind: 'int',
    default: '900',
    min: 1,
    max: 86400,
    services: ['reputation'],
    description: 'A history row is written when a score changes meaningfully, and at least this often per machine.',
  },
  {
    name: 'REPUTATION_HALF_LIFE_HOURS',
    kind: 'int',
    default: '84',
    min: 1,
    max: 8760,
    services: ['reputation'],
    description: 'Half-life of the outcomes, heartbeats and latencies a reputation is computed from: old failures fade.',
  },
  {
    name: 'CONTAINER_CRASH_BACKOFF_FIRST_MS',
    kind: 'int',
    default: '1000',
    min: 1,
    max: 3_600_000,
    services: ['scheduler', 'gateway'],
    description:
      "Crash loops: after a version's container crashes (exits, fails its readiness, cannot start), the wait before the scheduler starts the next one; doubles with each crash in a row.",
  },
  {
    name: 'CONTAINER_CRASH_BACKOFF_MAX_MS',
    kind: 'int',
    default: '300000',
    min: 1,
    max: 86_400_000,
    services: ['scheduler', 'gateway'],
    description:
      'Crash loops: the longest wait between two starts of a crashing version; its crash count starts over once it has gone twice this long (at least 10 minutes) without a crash.',
  },
  {
    name: 'CONTAINER_START_LIMIT_SECONDS',
    kind: 'int',
    default: '300',
    min: 1,
    max: 86400,
    services: ['scheduler'],
    description:
      "A container not ready this long after the scheduler placed it is failed by the scheduler (its reason says so), counted against its machine's reputation and replaced. Covers the image pull and the agent's own 120 s wait for a first passing health check; a machine that accepts a start and does nothing is caught by it.",
  },
  {
    name: 'TASK_LEASE_WAIT_SECONDS',
    kind: 'int',
    default: '300',
    min: 1,
    max: 86400,
    services: ['gateway'],
    description:
      "How long a task outcome waits for the start that records its attempt's lease (it may overtake it); then it is dropped as coming from no lease holder.",
  },
  {
    name: 'LOG_FOLLOWS_PER_TOKEN',
    kind: 'int',
    default: '4',
    min: 1,
    max: 1000,
    services: ['gateway'],
    description: 'Log streams (GET /api/v1/deployments/<name>/logs) one API token may hold open at once on a gateway; one more gets 429.',
  },
  {
    name: 'VOLUME_QUOTA_BYTES',
    kind: 'int',
    default: String(100 * 2 ** 30),
    min: 0,
    max: 2 ** 52,
    services: ['gateway'],
    description:
      "Bytes a workspace's volumes may store (chunks counted once however many files hold them); a put or commit beyond it is 413.",
  },
  {
    name: 'VOLUME_QUOTA_FILES',
    kind: 'int',
    default: '1000000',
    min: 0,
    max: 1000000000,
    services: ['gateway'],
    description: "Files a workspace's volumes may hold in all; a put or commit beyond it is 413.",
  },
  {
    name: 'ENDPOINT_BUFFER_SIZE',
    kind: 'int',
    default: '1000',
    min: 1,
    max: 1000000,
    services: ['gateway'],
    description: 'Requests the gateway holds per endpoint version while no container has room; beyond it, 429.',
  },
  {
    name: 'METERING_CHECKPOINT_INTERVAL_MS',
    kind: 'int',
    default: '5000',
    min: 100,
    max: 300000,
    services: ['metering'],
    description:
      'How often metering writes the usage of running containers up to now, so usage is current and a crash loses at most this much unwritten accrual (which the next checkpoint or the stop event restores).',
  },
  {
    name: 'AGENT_STATE_DIR',
    kind: 'string',
    services: ['agent'],
    description:
      'Where the agent keeps config.yaml, container bundles, logs and volumes (default ~/.tern-agent; `tern-agent --state-dir`).',
  },
  {
    name: 'AGENT_GATEWAY_URL',
    kind: 'string',
    services: ['agent'],
    description: 'Gateway the agent registers with; overrides config.yaml.',
  },
  {
    name: 'AGENT_TOKEN',
    kind: 'string',
    services: ['agent'],
    description: 'Join token (from `tern machine create`) or admin API token the agent registers with; overrides config.yaml.',
  },
  {
    name: 'AGENT_CA_FILE',
    kind: 'file',
    services: ['agent'],
    description:
      "CA certificate (PEM) the agent pins for the gateway's HTTPS and NATS's TLS; overrides config.yaml (tern-agent init --ca).",
  },
  {
    name: 'AGENT_BUILDER',
    kind: 'enum',
    default: 'false',
    values: ['true', 'false'],
    services: ['agent'],
    description:
      "true: the machine builds images from deployments' image specs (the gateway sends it builds with the registry's push user); overrides config.yaml (tern-agent init --builder). npm run up's agent is one.",
  },
  {
    name: 'AGENT_RUNTIME',
    kind: 'enum',
    default: 'runc',
    values: ['runc', 'nerdctl'],
    services: ['agent'],
    description: 'Container runtime the agent drives.',
  },
  {
    name: 'AGENT_VOLUME_CACHE_BYTES',
    kind: 'int',
    default: String(20 * 2 ** 30),
    min: 0,
    max: 2 ** 52,
    services: ['agent'],
    description:
      'Bytes of volume chunks the agent keeps under its state directory (volumes/chunks/), least recently used evicted first; a container mounting cached chunks downloads nothing.',
  },
  {
    name: 'AGENT_RUNNERS_DIR',
    kind: 'string',
    services: ['agent'],
    description:
      "Directory holding Tern's handler runners (python/tern_runner.py, node/tern-runner.mjs), bound read-only into handler containers at /tern/runners (default: the runners/ folder of the agent's installation).",
  },
  {
    name: 'AGENT_DASHBOARD',
    kind: 'enum',
    default: 'auto',
    values: ['auto', 'on', 'off'],
    services: ['agent'],
    description: 'Live terminal dashboard: auto shows it on a TTY, JSON logs otherwise.',
  },
  {
    name: 'MACHINE_ID',
    kind: 'string',
    services: ['agent'],
    description: 'Machine id this agent reports as (defaults to a stable id derived from the host name).',
  },
  {
    name: 'POOL',
    kind: 'string',
    default: 'default',
    services: ['agent'],
    description: 'Pool the agent joins.',
  },
] as const satisfies readonly VariableSpec[];

export type VariableName = (typeof VARIABLES)[number]['name'];

export function variablesFor(service: ServiceName): readonly VariableSpec[] {
  return VARIABLES.filter((v: VariableSpec) => v.services === 'all' || v.services.includes(service));
}

export { CONTROL_PLANE, WITH_DATABASE };
