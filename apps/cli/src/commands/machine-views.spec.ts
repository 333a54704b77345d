import { ago, bytes, mbps } from '../format.js';
import { gpuSummary, type MachineDetail, renderMachine, renderMachineList } from './machine-views.js';

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
  agentVersion: '0.1.0',
  registeredAt: '2026-01-01T11:57:00Z',
  os: { platform: 'linux', distro: 'Ubuntu', release: '22.04', kernel: '5.15.0', arch: 'x64' },
  disks: [{ mount: '/', fsType: 'ext4', sizeBytes: 500 * 1024 ** 3, freeBytes: 100 * 1024 ** 3 }],
  networkInterfaces: [{ name: 'eth0', addresses: ['10.0.0.5'], speedMbps: 10000 }],
  joinToken: { expiresAt: '2026-01-02T11:00:00Z', usedAt: '2026-01-01T11:57:00Z' },
  heartbeat: { sentAt: '2026-01-01T11:59:48Z', receivedAt: '2026-01-01T11:59:48Z', sequence: 7, runningContainers: [] },
  createdAt: '2026-01-01T11:00:00Z',
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
    expect(out[0]).toMatch(/^ID\s+POOL\s+STATE\s+CPU\s+MEMORY\s+GPUS\s+NETWORK\s+LAST HEARTBEAT$/);
    expect(out[1]).toMatch(/^gpu-1\s+default\s+ready\s+64 vCPU 12%\s+256 GiB 40%\s+2x H100 80GB HBM3 \(1 free\)\s+940 Mbps\s+12s ago$/);
    expect(renderMachineList([], now)).toMatch(/No machines yet/);
  });

  it('shows every detail of one machine', () => {
    const out = renderMachine(machine, now);
    expect(out).toMatch(/^State\s+ready \(first heartbeat\), since 2m ago$/m);
    expect(out).toMatch(/^CPU\s+AMD EPYC 7B13, 32 cores \/ 64 threads, 12% used$/m);
    expect(out).toMatch(/^GPUs\s+0  NVIDIA H100 80GB HBM3  80 GiB  driver 550.54  free$/m);
    expect(out).toMatch(/^Network\s+940 Mbps \(NATS 1.2 Gbps, HTTP 940 Mbps, 3 ms\), tested 5m ago$/m);
    expect(out).toMatch(/^Disks\s+\/ ext4 100 GiB free of 500 GiB$/m);
    expect(out).toMatch(/^Join token\s+used 3m ago$/m);
  });
});
