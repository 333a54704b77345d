import { type AgentSnapshot } from '../state/agent-state.js';
import { fit, formatDuration, renderDashboard, statusOf } from './render.js';

const NOW = Date.parse('2025-01-01T12:00:00Z');

function snapshot(over: Partial<AgentSnapshot> = {}): AgentSnapshot {
  return {
    now: NOW,
    phase: 'running',
    machineState: { state: 'ready', reason: 'heartbeating' },
    gateway: 'https://tern.example.com',
    pool: 'external',
    machineId: '159ecc90',
    startedAt: NOW - (2 * 3600 + 34 * 60) * 1000,
    nats: { connected: true, server: 'nats.example.com:4222' },
    cpuPercent: 18.2,
    memoryPercent: 56.1,
    gpus: [],
    network: {
      nats: { throughputMbps: 940, latencyMs: 0.42 },
      http: { throughputMbps: 812, latencyMs: 1.1 },
      verdict: { ok: true, throughputMbps: 812 },
      minNetworkMbps: 100,
      testedAt: NOW - 60_000,
    },
    lastHeartbeatAt: NOW - 3000,
    heartbeatIntervalSeconds: 10,
    containers: [
      { id: 'worker-abc123', state: 'ready', deployment: 'hello:v1', startedAt: NOW - 12_000 },
      { id: 'worker-def456', state: 'stopped', deployment: 'hello:v1', startedAt: NOW - 200_000, endedAt: NOW - 120_000, exitCode: 0 },
      { id: 'worker-ghi789', state: 'failed', deployment: 'job:v2', startedAt: NOW - 400_000, endedAt: NOW - 300_000, exitCode: 137 },
    ],
    events: [{ at: NOW - 5000, level: 'warn', msg: 'heartbeat 7 not delivered' }],
    ...over,
  };
}

const SIZE = { width: 80, height: 24 };

describe('dashboard rendering', () => {
  it('draws the header, status lines, the containers table and the help line at exactly the screen width', () => {
    const frame = renderDashboard(snapshot(), { mode: 'main', selected: 0 }, SIZE);
    const lines = frame.split('\n');
    expect(lines[0]).toMatch(/^╔══ Tern Agent: 159ecc90 ═+╗$/);
    expect(lines[1]).toContain('Status: READY │ Gateway: tern.example.com │ Pool: external │ Uptime: 2h 34m');
    expect(lines[2]).toContain('CPU: 18.2% │ Memory: 56.1% │ GPUs: 0 │ Last Heartbeat: 3s ago');
    expect(lines[3]).toContain('NATS: connected to nats.example.com:4222');
    expect(lines[4]).toContain('Network: NATS 940 Mbps, 0.42 ms │ HTTP 812 Mbps, 1.1 ms │ pool min 100 Mbps');
    expect(frame).toContain('CONTAINERS');
    expect(frame).toMatch(/> worker-abc123 +READY +hello:v1 +12s/);
    expect(frame).toMatch(/ {2}worker-def456 +STOPPED \(0\) +hello:v1 +1m 20s \(2m 0s ago\)/);
    expect(frame).toMatch(/worker-ghi789 +FAILED \(137\)/);
    expect(frame).toContain('WARN heartbeat 7 not delivered');
    expect(lines.at(-2)).toMatch(/^╚═+╝$/);
    expect(lines.at(-1)).toContain('↑/↓ select · l logs of the selected container · q quit');
    for (const l of lines) expect([...l]).toHaveLength(80);
    expect(lines.length).toBeLessThanOrEqual(24);
  });

  it('moves the selection marker', () => {
    const frame = renderDashboard(snapshot(), { mode: 'main', selected: 2 }, SIZE);
    expect(frame).toMatch(/> worker-ghi789/);
    expect(frame).not.toMatch(/> worker-abc123/);
  });

  it('says why the machine takes no work', () => {
    const unschedulable = snapshot({
      machineState: { state: 'unschedulable', reason: 'network 40 Mbps (http) is below pool "gpu"\'s minimum of 100 Mbps' },
    });
    const frame = renderDashboard(unschedulable, { mode: 'main', selected: 0 }, { width: 120, height: 30 });
    expect(frame).toContain('Status: UNSCHEDULABLE');
    expect(frame).toContain('Reason: network 40 Mbps (http) is below pool "gpu"\'s minimum of 100 Mbps');

    const registering = snapshot({
      phase: 'registering',
      phaseDetail: 'registration attempt 3 failed: cannot reach http://gw: ECONNREFUSED; retrying in 4 s',
      machineId: undefined,
    });
    const r = renderDashboard(registering, { mode: 'main', selected: 0 }, { width: 140, height: 30 });
    expect(r).toContain('Tern Agent: not registered');
    expect(r).toContain('Status: REGISTERING');
    expect(r).toContain('Reason: registration attempt 3 failed');
    expect(statusOf(snapshot({ nats: { connected: false } })).word).toBe('DISCONNECTED');
  });

  it('lists GPUs with their state', () => {
    const frame = renderDashboard(
      snapshot({
        gpus: [
          {
            index: 0,
            vendor: 'nvidia',
            model: 'NVIDIA H100 80GB HBM3',
            memoryMiB: 81559,
            driverVersion: '535.129.03',
            cudaVersion: '12.2',
            busy: true,
          },
        ],
      }),
      { mode: 'main', selected: 0 },
      { width: 120, height: 30 },
    );
    expect(frame).toContain('GPUs: 1 (1 busy)');
    expect(frame).toContain('GPU 0  NVIDIA H100 80GB HBM3  81559 MiB  nvidia driver 535.129.03 CUDA 12.2  BUSY');
  });

  it('shows the tail of a container log that fits the screen', () => {
    const logLines = Array.from({ length: 100 }, (_, i) => `line ${i}`);
    const frame = renderDashboard(snapshot(), { mode: 'logs', selected: 0, logContainerId: 'worker-abc123', logLines }, SIZE);
    const lines = frame.split('\n');
    expect(lines[0]).toContain('Logs: worker-abc123 (following)');
    expect(frame).toContain('line 99');
    expect(frame).not.toContain('line 70 ');
    expect(lines).toHaveLength(24);
    expect(lines.at(-1)).toContain('Esc/l back');
  });

  it('keeps the selected row visible when the table is longer than the screen', () => {
    const many = Array.from({ length: 40 }, (_, i) => ({
      id: `c${i}`,
      state: 'running' as const,
      deployment: 'd:v1',
      startedAt: NOW - 1000,
    }));
    const frame = renderDashboard(snapshot({ containers: many, events: [] }), { mode: 'main', selected: 35 }, SIZE);
    expect(frame).toMatch(/> c35 /);
    expect(frame.split('\n').length).toBeLessThanOrEqual(24);
  });

  it('colours only after fitting, so escape codes never break the width', () => {
    const frame = renderDashboard(snapshot(), { mode: 'main', selected: 0 }, SIZE, { color: true });
    expect(frame).toContain('\x1b[32mREADY\x1b[0m');
    expect(frame).toContain('\x1b[7m> worker-abc123');
    // eslint-disable-next-line no-control-regex -- strips the ANSI colour codes the frame is drawn with
    for (const l of frame.split('\n')) expect([...l.replace(/\x1b\[[0-9;]*m/g, '')]).toHaveLength(80);
  });

  it('formats durations and fits text', () => {
    expect([0, 45_000, 185_000, 9_240_000, 2 * 86_400_000 + 3_600_000].map(formatDuration)).toEqual([
      '0s',
      '45s',
      '3m 5s',
      '2h 34m',
      '2d 1h',
    ]);
    expect(fit('abcdef', 4)).toBe('abc…');
    expect(fit('ab', 4)).toBe('ab  ');
  });
});
