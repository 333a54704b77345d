import { CONTROL_PLANE, WITH_DATABASE, type VariableSpec } from '../variable-spec.js';

/** Where a service connects and listens: NATS, Postgres, HTTP, the ops port, logs, TLS. */
export const CONNECTION_VARIABLES = [
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
] as const satisfies readonly VariableSpec[];
