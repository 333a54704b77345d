import { type AgentSnapshot, type ContainerRow } from '../state/agent-state.js';

/**
 * The agent's terminal dashboard as a pure function of its state: plain box-drawing text,
 * one string per frame. ANSI styling is limited to the status word and the selected row and
 * is added after every line has been cut to width, so widths never count escape codes.
 */
export interface DashboardView {
  mode: 'main' | 'logs';
  /** Index into the containers table. */
  selected: number;
  /** In log mode: the container whose log is shown. */
  logContainerId?: string;
  /** In log mode: the lines to show (the tail is what fits). */
  logLines?: readonly string[];
}

export interface ScreenSize {
  width: number;
  height: number;
}

export interface RenderOptions {
  /** ANSI colours and reverse video; off gives plain text (tests, dumb terminals). */
  color?: boolean;
}

const ESC = '\x1b[';
const style = {
  green: (s: string) => `${ESC}32m${s}${ESC}0m`,
  yellow: (s: string) => `${ESC}33m${s}${ESC}0m`,
  red: (s: string) => `${ESC}31m${s}${ESC}0m`,
  reverse: (s: string) => `${ESC}7m${s}${ESC}0m`,
};

/** "45s", "3m 5s", "2h 34m", "3d 4h". */
export function formatDuration(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${s % 60}s`;
  const h = Math.floor(m / 60);
  if (h < 24) return `${h}h ${m % 60}m`;
  return `${Math.floor(h / 24)}d ${h % 24}h`;
}

function percent(n: number | undefined): string {
  return n === undefined ? '—' : `${n.toFixed(1)}%`;
}

function mbps(n: number): string {
  return n >= 1000 ? `${(n / 1000).toFixed(2)} Gbps` : `${n.toFixed(n < 10 ? 1 : 0)} Mbps`;
}

function host(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return url;
  }
}

/** The one word the status shows, and its colour. */
export function statusOf(s: AgentSnapshot): { word: string; tone: 'green' | 'yellow' | 'red'; reason?: string } {
  if (s.phase === 'failed') return { word: 'FAILED', tone: 'red', reason: s.phaseDetail };
  if (s.phase === 'stopping') return { word: 'STOPPING', tone: 'yellow' };
  if (s.phase !== 'running') return { word: s.phase.toUpperCase().replace('-', ' '), tone: 'yellow', reason: s.phaseDetail };
  if (!s.nats.connected) return { word: 'DISCONNECTED', tone: 'red', reason: 'NATS connection lost; reconnecting' };
  if (s.machineState?.state === 'unschedulable') return { word: 'UNSCHEDULABLE', tone: 'yellow', reason: s.machineState.reason };
  if (s.machineState?.state === 'offline') return { word: 'OFFLINE', tone: 'red', reason: s.machineState.reason };
  if (s.network && !s.network.verdict.ok && s.machineState?.state !== 'ready') {
    return { word: 'UNSCHEDULABLE', tone: 'yellow', reason: s.network.verdict.reason };
  }
  if (s.machineState?.state === 'ready') return { word: 'READY', tone: 'green' };
  return { word: (s.machineState?.state ?? 'registered').toUpperCase(), tone: 'yellow', reason: s.machineState?.reason };
}

/** Cuts or pads plain text to exactly `width` characters. */
export function fit(text: string, width: number): string {
  const chars = [...text.replace(/[\r\n\t]/g, ' ')];
  if (chars.length > width) return `${chars.slice(0, Math.max(0, width - 1)).join('')}…`;
  return chars.join('') + ' '.repeat(width - chars.length);
}

function containerLine(c: ContainerRow, now: number, widths: number[]): string {
  const age = c.endedAt
    ? `${formatDuration(c.endedAt - c.startedAt)} (${formatDuration(now - c.endedAt)} ago)`
    : formatDuration(now - c.startedAt);
  const state = c.state.toUpperCase() + (c.exitCode !== undefined && c.exitCode !== null && c.endedAt ? ` (${c.exitCode})` : '');
  return [c.id, state, c.deployment, age].map((v, i) => fit(v, widths[i])).join(' ');
}

type Status = ReturnType<typeof statusOf>;

/** One line of the frame: text, or a rule drawn across it. */
interface Row {
  text: string;
  kind?: 'top' | 'mid' | 'thin' | 'bottom' | 'selected';
}

/** The rows of a frame being built, with the two ways to add one. */
class Rows {
  readonly rows: Row[] = [];
  line(text = '', kind?: 'selected') {
    this.rows.push({ text, kind });
  }
  rule(kind: 'mid' | 'thin') {
    this.rows.push({ text: '', kind });
  }
}

export function renderDashboard(s: AgentSnapshot, view: DashboardView, size: ScreenSize, opts: RenderOptions = {}): string {
  const width = Math.max(40, size.width);
  const height = Math.max(10, size.height);
  const inner = width - 4;
  const rows = new Rows();
  const status = statusOf(s);
  const title =
    view.mode === 'logs' ? ` Logs: ${view.logContainerId ?? ''} (following) ` : ` Tern Agent: ${s.machineId ?? 'not registered'} `;
  rows.rows.push({ text: title, kind: 'top' });
  if (view.mode === 'logs') logRows(rows, view, height);
  else {
    summaryRows(rows, s, status);
    containerRows(rows, s, view, height, inner);
  }
  rows.rows.push({ text: '', kind: 'bottom' });
  const out = rows.rows.map((r) => drawRow(r, width, inner, status, opts));
  const help = view.mode === 'logs' ? 'Esc/l back to the dashboard · q quit' : '↑/↓ select · l logs of the selected container · q quit';
  out.push(fit(` ${help}`, width));
  return out.slice(0, height).join('\n');
}

/** The newest lines of the followed container's log that fit. */
function logRows(rows: Rows, view: DashboardView, height: number): void {
  const available = height - 3;
  const lines = view.logLines ?? [];
  const tail = lines.slice(Math.max(0, lines.length - available));
  for (const l of tail) rows.line(l);
  if (!lines.length) rows.line('(no output yet)');
}

/** The machine: status, use, NATS and network, and its GPUs. */
function summaryRows(rows: Rows, s: AgentSnapshot, status: Status): void {
  const uptime = formatDuration(s.now - s.startedAt);
  rows.line(`Status: ${status.word} │ Gateway: ${host(s.gateway)} │ Pool: ${s.pool} │ Uptime: ${uptime}`);
  const beat = s.lastHeartbeatAt ? `${formatDuration(s.now - s.lastHeartbeatAt)} ago` : 'never';
  const busy = s.gpus.filter((g) => g.busy).length;
  rows.line(
    `CPU: ${percent(s.cpuPercent)} │ Memory: ${percent(s.memoryPercent)} │ GPUs: ${s.gpus.length}${s.gpus.length ? ` (${busy} busy)` : ''} │ Last Heartbeat: ${beat}`,
  );
  const nats = s.nats.connected ? `connected${s.nats.server ? ` to ${s.nats.server}` : ''}` : 'disconnected';
  const net = s.network
    ? `NATS ${s.network.nats.error ? `failed (${s.network.nats.error})` : `${mbps(s.network.nats.throughputMbps)}, ${s.network.nats.latencyMs} ms`} │ HTTP ${
        s.network.http.error ? `failed (${s.network.http.error})` : `${mbps(s.network.http.throughputMbps)}, ${s.network.http.latencyMs} ms`
      }${s.network.minNetworkMbps ? ` │ pool min ${s.network.minNetworkMbps} Mbps` : ''}`
    : 'not tested yet';
  rows.line(`NATS: ${nats}`);
  rows.line(`Network: ${net}`);
  if (status.reason) rows.line(`Reason: ${status.reason}`);
  if (s.gpus.length) {
    rows.rule('mid');
    for (const g of s.gpus) {
      rows.line(
        `GPU ${g.index}  ${g.model}  ${g.memoryMiB} MiB  ${g.vendor}${g.driverVersion ? ` driver ${g.driverVersion}` : ''}${g.cudaVersion ? ` CUDA ${g.cudaVersion}` : ''}  ${g.busy ? 'BUSY' : 'free'}`,
      );
    }
  }
}

/** The containers, as many as fit around the selected one, and the last events. */
function containerRows(rows: Rows, s: AgentSnapshot, view: DashboardView, height: number, inner: number): void {
  rows.rule('mid');
  rows.line('CONTAINERS');
  rows.rule('thin');
  const widths = [Math.max(12, Math.floor(inner * 0.24)), 14, Math.max(10, Math.floor(inner * 0.22))];
  widths.push(Math.max(4, inner - 2 - widths.reduce((a, b) => a + b + 1, 0)));
  const eventsWanted = Math.min(5, s.events.length);
  const fixed = rows.rows.length + 1 /* header */ + (eventsWanted ? eventsWanted + 2 : 0) + 2; /* bottom + help */
  const room = Math.max(1, height - fixed);
  if (!s.containers.length) {
    rows.line('  (no containers)');
  } else {
    rows.line(`  ${['ID', 'STATE', 'DEPLOYMENT', 'AGE'].map((h, i) => fit(h, widths[i])).join(' ')}`);
    const selected = Math.min(Math.max(0, view.selected), s.containers.length - 1);
    const first = Math.max(0, Math.min(selected - room + 1, s.containers.length - room));
    s.containers.slice(first, first + room).forEach((c, i) => {
      const isSelected = first + i === selected;
      const text = `${isSelected ? '>' : ' '} ${containerLine(c, s.now, widths)}`;
      if (isSelected) rows.line(text, 'selected');
      else rows.line(text);
    });
  }
  if (eventsWanted) {
    rows.rule('mid');
    for (const e of s.events.slice(-eventsWanted))
      rows.line(`${new Date(e.at).toISOString().slice(11, 19)} ${e.level === 'info' ? '' : `${e.level.toUpperCase()} `}${e.msg}`);
  }
}

function drawRow(r: Row, width: number, inner: number, status: Status, opts: RenderOptions): string {
  switch (r.kind) {
    case 'top': {
      const t = [...r.text].length > width - 6 ? fit(r.text, width - 6) : r.text;
      return `╔══${t}${'═'.repeat(Math.max(0, width - 3 - [...t].length - 1))}╗`;
    }
    case 'mid':
      return `╠${'═'.repeat(width - 2)}╣`;
    case 'thin':
      return `╟${'─'.repeat(width - 2)}╢`;
    case 'bottom':
      return `╚${'═'.repeat(width - 2)}╝`;
    default: {
      let body = fit(r.text, inner);
      if (opts.color && r.kind === 'selected') body = style.reverse(body);
      if (opts.color && body.startsWith(`Status: ${status.word}`)) body = body.replace(status.word, style[status.tone](status.word));
      return `║ ${body} ║`;
    }
  }
}
