import { ago, bytes, mbps } from '../format.js';
import type { MachineDetail } from '#tern/contracts';
import { gpuSummary, renderMachine, renderMachineList, renderReputation } from './machine-views.js';

const now = Date.parse('2026-01-01T12:00:00Z');
const machine: MachineDetail = {
  id: 'gpu-1',
  pool: 'default',
  state: 'ready',
  stateReason: 'first heartbeat',
  stateChangedAt: '2026-01-01T11:58:00Z',
  hostname: 'box',
  cpu: { model: 'AMD EPYC 7B13', cores: 32, threads: 64, usagePercent: 12.4 },
  memory: { totalBytes: 256 * 1024 ** 3, usagePercent: 40 },
  gpus: [
    { index: 0, model: 'NVIDIA H100 80GB HBM3', memoryMiB: 81559, driverVersion: '550.54', state: 'free' },
    { index: 1, model: 'NVIDIA H100 80GB HBM3', memoryMiB: 81559, driverVersion: '550.54', state: 'busy' },
  ],
  network: { throughputMbps: 940, natsMbps: 1200, httpMbps: 940, latencyMs: 3.2, testedAt: '2026-01-01T11:55:00Z' },
  lastHeartbeatAt: '2026-01-01T11:59:48Z',
  runningContainers: 1,
  agentVersion: '0.1.0',
  registeredAt: '2026-01-01T11:57:00Z',
  os: { platform: 'linux', distro: 'Ubuntu', release: '22.04', kernel: '5.15.0', arch: 'x64' },
  disks: [{ mount: '/', fsType: 'ext4', sizeBytes: 500 * 1024 ** 3, freeBytes: 100 * 1024 ** 3 }],
  networkInterfaces: [{ name: 'eth0', addresses: ['10.0.0.5'], speedMbps: 10000 }],
  joinToken: { expiresAt: '2026-01-02T11:00:00Z', usedAt: '2026-01-01T11:57:00Z' },
  heartbeat: { sentAt: '2026-01-01T11:59:48Z', receivedAt: '2026-01-01T11:59:48Z', sequence: 7, runningContainers: [] },
  createdAt: '2026-01-01T11:00:00Z',
  updatedAt: '2026-01-01T11:59:48Z',
  reputation: {
    score: 0.8731,
    components: {
      uptime: 0.99,
      uptime1d: 1,
      uptime7d: 0.98,
      uptime30d: 0.97,
      taskSuccess: 0.9333,
      startSuccess: 0.8,
      startLatency: 0.8,
      heartbeat: 0.99,
      network: 0.96,
    },
    observed: 12.4,
    standing: 'proven',
    computedAt: '2026-01-01T11:59:57Z',
  },
  verification: {
    state: 'verified',
    reason: 'proved CPU (AMD EPYC 7B13) at 900 M multiply-adds/s; GPU 0 (NVIDIA H100 80GB HBM3) at 400 T multiply-adds/s',
    checkedAt: '2026-01-01T11:59:00Z',
  },
};

describe('machine views', () => {
  it('formats in human units', () => {
    expect(ago('2026-01-01T11:59:48Z', now)).toBe('12s ago');
    expect(ago('2026-01-01T09:00:00Z', now)).toBe('3h ago');
    expect(ago(null, now)).toBe('never');
    expect(bytes(256 * 1024 ** 3)).toBe('256 GiB');
    expect(bytes(1.5 * 1024 ** 3)).toBe('1.5 GiB');
    expect(mbps(940)).toBe('940 Mbps');
    expect(mbps(1200)).toBe('1.2 Gbps');
  });

  it('groups GPUs by model and counts the free ones', () => {
    expect(gpuSummary(machine.gpus)).toBe('2x H100 80GB HBM3 (1 free)');
    expect(gpuSummary([])).toBe('-');
  });

  it('lists machines in a table', () => {
    const out = renderMachineList([machine], now).split('\n');
    expect(out[0]).toMatch(/^ID\s+POOL\s+STATE\s+HARDWARE\s+CPU\s+MEMORY\s+GPUS\s+NETWORK\s+REPUTATION\s+LAST HEARTBEAT$/);
    expect(out[1]).toMatch(
      /^gpu-1\s+default\s+ready\s+verified\s+64 vCPU 12%\s+256 GiB 40%\s+2x H100 80GB HBM3 \(1 free\)\s+940 Mbps\s+0\.87\s+12s ago$/,
    );
    expect(renderMachineList([{ ...machine, reputation: null }], now).split('\n')[1]).toMatch(/940 Mbps\s+-\s+12s ago$/);
    expect(renderMachineList([], now)).toMatch(/No machines yet/);
  });

  it('shows every detail of one machine', () => {
    const out = renderMachine(machine, now);
    expect(out).toMatch(/^State\s+ready \(first heartbeat\), since 2m ago$/m);
    expect(out).toMatch(/^CPU\s+AMD EPYC 7B13, 32 cores \/ 64 threads, 12% used$/m);
    expect(out).toMatch(/^GPUs\s+0 {2}NVIDIA H100 80GB HBM3 {2}80 GiB {2}driver 550.54 {2}free$/m);
    expect(out).toMatch(/^Network\s+940 Mbps \(NATS 1.2 Gbps, HTTP 940 Mbps, 3 ms\), tested 5m ago$/m);
    expect(out).toMatch(/^Disks\s+\/ ext4 100 GiB free of 500 GiB$/m);
    expect(out).toMatch(/^Join token\s+used 3m ago$/m);
    expect(out).toMatch(/^Reputation\s+0\.87, proven \(12 starts and tasks observed\) \(computed 3s ago\)$/m);
    expect(out).toMatch(/^\s+uptime\s+0\.99 {2}\(1d 1\.00, 7d 0\.98, 30d 0\.97\)$/m);
    expect(out).toMatch(/^\s+task success\s+0\.93$/m);
    expect(out).toMatch(/^\s+network\s+0\.96$/m);
    expect(renderMachine({ ...machine, reputation: null }, now)).toMatch(/^Reputation\s+not scored yet$/m);
  });

  it('says where its volume and image bytes come from: a site cache or the registry', () => {
    expect(renderMachine(machine, now)).toMatch(/^Volume and image bytes from\s+Tern's registry, directly$/m);
    const cached = { ...machine, heartbeat: { ...machine.heartbeat!, siteCache: 'http://10.0.0.5:5080' } };
    expect(renderMachine(cached, now)).toMatch(
      /^Volume and image bytes from\s+the site cache http:\/\/10\.0\.0\.5:5080 \(in front of Tern's registry; images of other registries directly\)$/m,
    );
  });

  it('says what the hardware challenge found, and why a machine is quarantined', () => {
    expect(renderMachine(machine, now)).toMatch(/^Hardware\s+verified: proved CPU \(AMD EPYC 7B13\) at 900 M .* \(checked 1m ago\)$/m);
    const reason = 'GPU 0 (NVIDIA H100 80GB HBM3) did not commit to a 4096×4096 int8 product within 2.68 s';
    const quarantined = { ...machine, verification: { state: 'quarantined' as const, reason, checkedAt: '2026-01-01T11:59:30Z' } };
    expect(renderMachine(quarantined, now)).toMatch(
      /^Hardware\s+quarantined: GPU 0 \(NVIDIA H100 80GB HBM3\) did not commit .* \(checked 30s ago\)$/m,
    );
    expect(renderMachineList([quarantined], now).split('\n')[1]).toMatch(/^gpu-1\s+default\s+ready\s+quarantined\s+/);
    const fresh = { ...machine, verification: { state: 'unverified' as const, reason: null, checkedAt: null } };
    expect(renderMachine(fresh, now)).toMatch(/^Hardware\s+unverified \(not challenged yet\)$/m);
  });

  it('says when a reputation is unproven, and that an unmeasured network counts nothing', () => {
    const { network: _, ...components } = machine.reputation!.components;
    const fresh = {
      ...machine,
      reputation: { ...machine.reputation!, score: 0.9333, components, observed: 0, standing: 'unproven' as const },
    };
    const out = renderMachine(fresh, now);
    expect(out).toMatch(/^Reputation\s+0\.93, unproven \(0 starts and tasks observed: mostly the prior's guess\) \(computed 3s ago\)$/m);
    expect(out).toMatch(/^\s+network\s+not measured by the control plane \(counts nothing\)$/m);
    expect(renderMachineList([fresh], now).split('\n')[1]).toMatch(/940 Mbps\s+0\.93 unproven\s+12s ago$/);
  });

  it('says how the machine isolates containers', () => {
    const isolated = (network: 'private' | 'host', userNamespaces: boolean) =>
      renderMachine({ ...machine, heartbeat: { ...machine.heartbeat!, isolation: { runtime: 'runc', network, userNamespaces } } }, now);
    expect(isolated('private', true)).toMatch(/^Isolation\s+runc, network private, user namespaces on$/m);
    expect(isolated('host', false)).toMatch(
      /^Isolation\s+runc, network host \(containers share the machine's network: no isolation\), user namespaces off$/m,
    );
    expect(renderMachine(machine, now)).not.toMatch(/^Isolation/m);
  });

  it('shows a reputation with its history', () => {
    const r = machine.reputation!;
    const out = renderReputation(
      { machineId: 'gpu-1', ...r, history: [r, { ...r, score: 0.8, computedAt: '2026-01-01T11:00:00Z' }] },
      now,
    ).split('\n');
    expect(out[0]).toBe('Reputation  0.87, proven (12 starts and tasks observed) (computed 3s ago)');
    const header = out.findIndex((l) => l.startsWith('COMPUTED'));
    expect(out[header]).toMatch(/^COMPUTED\s+SCORE\s+STANDING\s+UPTIME\s+TASKS\s+STARTS\s+LATENCY\s+HEARTBEAT\s+NETWORK$/);
    expect(out[header + 2]).toMatch(/^2026-01-01T11:00:00Z\s+0\.80\s+proven\s+0\.99\s+0\.93/);
    expect(
      renderReputation(
        { machineId: 'm', score: null, components: null, observed: null, standing: null, computedAt: null, history: [] },
        now,
      ),
    ).toBe('Reputation  not scored yet\n\nNo history yet.');
  });
});
