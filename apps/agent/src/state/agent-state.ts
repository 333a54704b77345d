import { type GpuInventory, type MachineState, type NetworkPathResult } from '#tern/contracts';
import { type NetworkVerdict } from '../network-test/measure.js';

/** Where the agent is in its life, as the dashboard and logs name it. */
export type AgentPhase = 'starting' | 'registering' | 'connecting' | 'testing-network' | 'running' | 'stopping' | 'failed';

export type ContainerRowState = 'starting' | 'running' | 'ready' | 'stopping' | 'stopped' | 'failed';

export interface ContainerRow {
  id: string;
  state: ContainerRowState;
  /** deployment id and version, e.g. "dep-1:v3". */
  deployment: string;
  startedAt: number;
  endedAt?: number;
  exitCode?: number | null;
  detail?: string;
}

export interface NetworkTestView {
  nats: NetworkPathResult;
  http: NetworkPathResult;
  verdict: NetworkVerdict;
  minNetworkMbps?: number;
  testedAt: number;
}

export interface EventLine {
  at: number;
  level: 'info' | 'warn' | 'error';
  msg: string;
}

/** Everything the dashboard shows, as plain data: the input of renderDashboard(). */
export interface AgentSnapshot {
  now: number;
  phase: AgentPhase;
  phaseDetail?: string;
  /** The scheduler's view of this machine (from machine.state-changed), once it has said. */
  machineState?: { state: MachineState; reason: string };
  gateway: string;
  pool: string;
  machineId?: string;
  startedAt: number;
  nats: { connected: boolean; server?: string };
  cpuPercent?: number;
  memoryPercent?: number;
  gpus: (GpuInventory & { busy: boolean })[];
  network?: NetworkTestView;
  lastHeartbeatAt?: number;
  heartbeatIntervalSeconds?: number;
  containers: ContainerRow[];
  events: EventLine[];
}

const MAX_EVENTS = 50;
const MAX_LOG_LINES = 1000;
/** Finished containers stay on the dashboard this long. */
const KEEP_FINISHED_MS = 10 * 60_000;

/**
 * The agent's live state, shared by its parts (registration, heartbeats, network test,
 * containers) and read by the dashboard once a second. Outlives each NATS session.
 */
export class AgentState {
  phase: AgentPhase = 'starting';
  phaseDetail?: string;
  machineState?: AgentSnapshot['machineState'];
  machineId?: string;
  nats: AgentSnapshot['nats'] = { connected: false };
  cpuPercent?: number;
  memoryPercent?: number;
  gpus: GpuInventory[] = [];
  busyGpus = new Set<string>();
  network?: NetworkTestView;
  lastHeartbeatAt?: number;
  heartbeatIntervalSeconds?: number;
  readonly startedAt = Date.now();
  private readonly containers = new Map<string, ContainerRow>();
  private readonly events: EventLine[] = [];
  private readonly logs = new Map<string, string[]>();

  constructor(
    public gateway: string,
    public pool: string,
  ) {}

  setPhase(phase: AgentPhase, detail?: string) {
    this.phase = phase;
    this.phaseDetail = detail;
  }

  upsertContainer(row: Partial<ContainerRow> & { id: string }) {
    const prev = this.containers.get(row.id);
    this.containers.set(row.id, { state: 'starting', deployment: '', startedAt: Date.now(), ...prev, ...row });
  }

  containerRows(now = Date.now()): ContainerRow[] {
    for (const [id, row] of this.containers) {
      if (row.endedAt && now - row.endedAt > KEEP_FINISHED_MS) {
        this.containers.delete(id);
        this.logs.delete(id);
      }
    }
    return [...this.containers.values()].sort((a, b) => a.startedAt - b.startedAt);
  }

  appendLog(containerId: string, line: string) {
    let lines = this.logs.get(containerId);
    if (!lines) this.logs.set(containerId, (lines = []));
    lines.push(line);
    if (lines.length > MAX_LOG_LINES) lines.splice(0, lines.length - MAX_LOG_LINES);
  }

  containerLog(containerId: string): readonly string[] {
    return this.logs.get(containerId) ?? [];
  }

  addEvent(level: EventLine['level'], msg: string, at = Date.now()) {
    this.events.push({ at, level, msg });
    if (this.events.length > MAX_EVENTS) this.events.splice(0, this.events.length - MAX_EVENTS);
  }

  snapshot(now = Date.now()): AgentSnapshot {
    return {
      now,
      phase: this.phase,
      phaseDetail: this.phaseDetail,
      machineState: this.machineState,
      gateway: this.gateway,
      pool: this.pool,
      machineId: this.machineId,
      startedAt: this.startedAt,
      nats: { ...this.nats },
      cpuPercent: this.cpuPercent,
      memoryPercent: this.memoryPercent,
      gpus: this.gpus.map((g) => ({ ...g, busy: this.busyGpus.has(`${g.vendor}:${g.index}`) })),
      network: this.network,
      lastHeartbeatAt: this.lastHeartbeatAt,
      heartbeatIntervalSeconds: this.heartbeatIntervalSeconds,
      containers: this.containerRows(now),
      events: [...this.events],
    };
  }
}
