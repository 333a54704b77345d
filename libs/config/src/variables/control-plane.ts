import { type VariableSpec } from '../variable-spec.js';

/** What the control plane offers and keeps: public addresses, the registry, secrets, machines' credentials and heartbeats, and its limits and intervals. */
export const CONTROL_PLANE_VARIABLES = [
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
  // Proof of hardware (libs/proof, the scheduler's MachineVerifier).
  {
    name: 'MACHINE_CHALLENGE_INTERVAL_SECONDS',
    kind: 'int',
    default: '21600',
    min: 10,
    max: 604800,
    services: ['scheduler'],
    description:
      'A machine is challenged to prove its CPU and GPUs at join, whenever its inventory changes, and again about this often after each challenge (±50 % at random, so a machine cannot tell when the next one comes).',
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
    name: 'SPOT_CHECK_MARGIN_SECONDS',
    kind: 'int',
    default: '120',
    min: 1,
    max: 86400,
    services: ['gateway'],
    description:
      "How long past the task's own timeout a spot check waits on its verifier; then it is `expired` and counts against neither machine.",
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
] as const satisfies readonly VariableSpec[];
