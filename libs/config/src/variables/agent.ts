import { type VariableSpec } from '../variable-spec.js';

/** What the node agent reads. */
export const AGENT_VARIABLES = [
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
    name: 'AGENT_PROVER_PYTHON',
    kind: 'string',
    services: ['agent'],
    description:
      "The Python interpreter with PyTorch that proves this machine's GPUs (runners/python/tern_prover.py in a container on the GPU), e.g. /opt/torch/.venv/bin/python3; its virtual environment is bound read-only into the prover's container when outside /usr (default: python3 of the host image).",
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
