import type { CreatedMachine, GpuView, MachineDetail, MachineReputation, MachineSummary, ReputationView } from '#tern/contracts';
import { ago, bytes, mbps, percent } from '../format.js';
import { table } from '../table.js';

function shortModel(model: string): string {
  return model.replace(/^NVIDIA\s+/i, '').replace(/^GeForce\s+/i, '');
}

/** "2x H100 80GB HBM3 (1 free)", one group per model. */
export function gpuSummary(gpus: GpuView[]): string {
  if (!gpus.length) return '-';
  const groups = new Map<string, GpuView[]>();
  for (const g of gpus) groups.set(g.model, [...(groups.get(g.model) ?? []), g]);
  return [...groups.entries()]
    .map(([model, list]) => {
      const known = list.filter((g) => g.state);
      const free = known.filter((g) => g.state === 'free').length;
      return `${list.length}x ${shortModel(model)}${known.length ? ` (${free} free)` : ''}`;
    })
    .join(', ');
}

function cpu(m: MachineSummary): string {
  const count = m.cpu.threads ?? m.cpu.cores;
  if (count === null) return '-';
  return [`${count} vCPU`, percent(m.cpu.usagePercent)].filter(Boolean).join(' ');
}

function memory(m: MachineSummary): string {
  if (m.memory.totalBytes === null) return '-';
  return [bytes(m.memory.totalBytes), percent(m.memory.usagePercent)].filter(Boolean).join(' ');
}

function network(m: MachineSummary): string {
  if (!m.network) return '-';
  return m.network.error ? 'test failed' : mbps(m.network.throughputMbps);
}

export function renderMachineList(machines: MachineSummary[], now = Date.now()): string {
  if (!machines.length) return 'No machines yet. Add one with: tern machine create --pool default';
  return table(
    ['ID', 'POOL', 'STATE', 'HARDWARE', 'CPU', 'MEMORY', 'GPUS', 'NETWORK', 'REPUTATION', 'LAST HEARTBEAT'],
    machines.map((m) => [
      m.id,
      m.pool,
      m.state,
      m.verification?.state ?? '-',
      cpu(m),
      memory(m),
      gpuSummary(m.gpus),
      network(m),
      m.reputation ? `${fixed(m.reputation.score)}${m.reputation.standing === 'unproven' ? ' unproven' : ''}` : '-',
      ago(m.lastHeartbeatAt, now),
    ]),
  );
}

export function renderMachine(m: MachineDetail, now = Date.now()): string {
  const lines: [string, string][] = [
    ['Machine', m.id],
    ['Pool', m.pool],
    ['State', `${m.state}${m.stateReason ? ` (${m.stateReason})` : ''}, since ${ago(m.stateChangedAt, now)}`],
    ['Hostname', m.hostname ?? '-'],
    ['Agent', m.agentVersion ?? '-'],
    ['Registered', m.registeredAt ? `${m.registeredAt} (${ago(m.registeredAt, now)})` : 'not yet'],
    ['Last heartbeat', ago(m.lastHeartbeatAt, now)],
    [
      'CPU',
      m.cpu.model
        ? `${m.cpu.model}, ${m.cpu.cores} cores / ${m.cpu.threads} threads${m.cpu.usagePercent !== null ? `, ${percent(m.cpu.usagePercent)} used` : ''}`
        : '-',
    ],
    [
      'Memory',
      m.memory.totalBytes !== null
        ? `${bytes(m.memory.totalBytes)}${m.memory.usagePercent !== null ? `, ${percent(m.memory.usagePercent)} used` : ''}`
        : '-',
    ],
  ];
  const gpus = m.gpus.map(
    (g) =>
      `${g.index}  ${g.model}  ${bytes(g.memoryMiB * 1024 * 1024)}${g.driverVersion ? `  driver ${g.driverVersion}` : ''}${g.state ? `  ${g.state}` : ''}`,
  );
  lines.push(...block('GPUs', gpus.length ? gpus : ['none']));
  const n = m.network;
  lines.push([
    'Network',
    n
      ? `${n.error ? `test failed: ${n.error}` : mbps(n.throughputMbps)} (NATS ${mbps(n.natsMbps)}, HTTP ${mbps(n.httpMbps)}, ${Math.round(n.latencyMs)} ms), tested ${ago(n.testedAt, now)}`
      : 'not tested yet',
  ]);
  lines.push(
    ...block(
      'Interfaces',
      m.networkInterfaces.map((i) => `${i.name} ${i.addresses.join(' ') || '-'}${i.speedMbps ? ` (${mbps(i.speedMbps)})` : ''}`),
    ),
  );
  lines.push(
    ...block(
      'Disks',
      m.disks.map((d) => `${d.mount} ${d.fsType} ${bytes(d.freeBytes)} free of ${bytes(d.sizeBytes)}`),
    ),
  );
  if (m.os) lines.push(['OS', `${m.os.distro} ${m.os.release} (${m.os.platform}, kernel ${m.os.kernel}, ${m.os.arch})`]);
  if (m.joinToken) {
    lines.push([
      'Join token',
      m.joinToken.usedAt ? `used ${ago(m.joinToken.usedAt, now)}` : `unused, expires ${m.joinToken.expiresAt ?? 'never'}`,
    ]);
  }
  lines.push(verificationLine(m, now));
  lines.push(...reputationLines(m.reputation ?? null, now));
  const iso = m.heartbeat?.isolation;
  if (iso)
    lines.push([
      'Isolation',
      `${iso.runtime}, network ${iso.network === 'host' ? "host (containers share the machine's network: no isolation)" : 'private'}, user namespaces ${iso.userNamespaces ? 'on' : 'off'}`,
    ]);
  if (m.heartbeat) lines.push(['Builds images', m.heartbeat.builder ? 'yes (AGENT_BUILDER=true)' : 'no']);
  if (m.heartbeat)
    lines.push([
      'Volume and image bytes from',
      m.heartbeat.siteCache
        ? `the site cache ${m.heartbeat.siteCache} (in front of Tern's registry; images of other registries directly)`
        : "Tern's registry, directly",
    ]);
  if (m.heartbeat) lines.push(...block('Containers', m.heartbeat.runningContainers.length ? m.heartbeat.runningContainers : ['none']));
  const width = Math.max(...lines.map(([k]) => k.length));
  return lines.map(([k, v]) => `${k.padEnd(width)}  ${v}`.trimEnd()).join('\n');
}

/** "Hardware  quarantined: GPU 0 (…) did not commit … (checked 3s ago)": what the control plane's challenge found. */
function verificationLine(m: MachineSummary, now: number): [string, string] {
  const v = m.verification;
  if (!v) return ['Hardware', 'not reported by this gateway'];
  const checked = v.checkedAt ? ` (checked ${ago(v.checkedAt, now)})` : ' (not challenged yet)';
  return ['Hardware', `${v.state}${v.reason ? `: ${v.reason}` : ''}${checked}`];
}

function fixed(n: number | undefined): string {
  return n === undefined ? '-' : n.toFixed(2);
}

/** The weighted components in the order docs/architecture.md's formula lists them, with their labels. */
const COMPONENTS: [key: string, label: string][] = [
  ['uptime', 'uptime'],
  ['taskSuccess', 'task success'],
  ['startSuccess', 'start success'],
  ['startLatency', 'start latency'],
  ['heartbeat', 'heartbeat'],
  ['network', 'network'],
];

/** "proven, 12 starts and tasks observed": how much of the score rests on what the control plane saw. */
function standing(r: Pick<ReputationView, 'standing' | 'observed'>): string {
  // An entry written before standings were kept has neither.
  if (r.standing === undefined) return '';
  const observed = `${Math.round(r.observed ?? 0)} starts and tasks observed`;
  return r.standing === 'unproven' ? `, unproven (${observed}: mostly the prior's guess)` : `, proven (${observed})`;
}

/** "Reputation 0.87, proven (… observed) (computed 3s ago)" and one line per component. */
export function reputationLines(r: ReputationView | null, now = Date.now()): [string, string][] {
  if (!r) return [['Reputation', 'not scored yet']];
  const width = Math.max(...COMPONENTS.map(([, label]) => label.length));
  const c = r.components;
  const parts = COMPONENTS.map(([key, label]) => {
    const extra =
      key === 'uptime' && c.uptime1d !== undefined ? `  (1d ${fixed(c.uptime1d)}, 7d ${fixed(c.uptime7d)}, 30d ${fixed(c.uptime30d)})` : '';
    // The agent's own network test counts nothing; only the control plane's measurement would.
    const value = key === 'network' && c.network === undefined ? 'not measured by the control plane (counts nothing)' : fixed(c[key]);
    return `${label.padEnd(width)}  ${value}${extra}`;
  });
  return block('Reputation', [`${fixed(r.score)}${standing(r)} (computed ${ago(r.computedAt, now)})`, ...parts]);
}

/** `tern machine reputation <id>`: the current score, its components, then the history. */
export function renderReputation(r: MachineReputation, now = Date.now()): string {
  const current = reputationLines(
    r.score === null
      ? null
      : {
          score: r.score,
          components: r.components ?? {},
          observed: r.observed ?? 0,
          standing: r.standing ?? 'unproven',
          computedAt: r.computedAt ?? '',
        },
    now,
  );
  const width = Math.max(...current.map(([k]) => k.length));
  const head = current.map(([k, v]) => `${k.padEnd(width)}  ${v}`.trimEnd()).join('\n');
  if (!r.history.length) return `${head}\n\nNo history yet.`;
  const rows = r.history.map((h) => [h.computedAt, fixed(h.score), h.standing, ...COMPONENTS.map(([key]) => fixed(h.components[key]))]);
  return `${head}\n\n${table(['COMPUTED', 'SCORE', 'STANDING', 'UPTIME', 'TASKS', 'STARTS', 'LATENCY', 'HEARTBEAT', 'NETWORK'], rows)}`;
}

/** A label on the first line of a multi-line value. */
function block(label: string, values: string[]): [string, string][] {
  return values.length ? values.map((v, i) => [i ? '' : label, v]) : [[label, '-']];
}

export function renderCreated(c: CreatedMachine): string {
  return [
    `Machine ${c.machineId} created in pool ${c.pool}. Its join token works once, until ${c.expiresAt}, and is not shown again:`,
    '',
    `  ${c.joinToken}`,
    '',
    'On the worker, run:',
    '',
    `  ${c.command}`,
    '  tern-agent',
  ].join('\n');
}
