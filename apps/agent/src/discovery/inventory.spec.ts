import { MachineInventory } from '#tern/contracts';
import { validatePayload } from '#tern/messaging';
import { discoverInventory, inventoryFingerprint, toCpu, toDisks, toInterfaces } from './inventory.js';

describe('inventory', () => {
  it('names the CPU once, with cores and threads', () => {
    expect(toCpu({ manufacturer: 'AMD', brand: 'EPYC 7763 64-Core Processor', physicalCores: 64, cores: 128 })).toEqual({
      model: 'AMD EPYC 7763 64-Core Processor',
      cores: 64,
      threads: 128,
    });
    expect(toCpu({ manufacturer: 'Intel', brand: 'Intel® Xeon® Gold 6338', physicalCores: 0, cores: 4 })).toEqual({
      model: 'Intel® Xeon® Gold 6338',
      cores: 4,
      threads: 4,
    });
  });

  it('keeps real disks once each, not overlays and pseudo file systems', () => {
    expect(
      toDisks([
        { mount: '/', type: 'ext4', size: 100, available: 40 },
        { mount: '/', type: 'ext4', size: 100, available: 40 },
        { mount: '/var/lib/docker/overlay2/x/merged', type: 'overlay', size: 100, available: 40 },
        { mount: '/dev/shm', type: 'tmpfs', size: 10, available: 10 },
        { mount: '/data', type: 'xfs', size: 2000.4, available: 1000.6 },
      ]),
    ).toEqual([
      { mount: '/', fsType: 'ext4', sizeBytes: 100, freeBytes: 40 },
      { mount: '/data', fsType: 'xfs', sizeBytes: 2000, freeBytes: 1001 },
    ]);
  });

  it('lists external interfaces with bare addresses and a speed only when known', () => {
    expect(
      toInterfaces([
        { iface: 'lo', mac: '00:00:00:00:00:00', ip4: '127.0.0.1', ip6: '::1', speed: null, internal: true, virtual: true },
        { iface: 'eth0', mac: '02:fc:00:00:00:01', ip4: '192.0.2.2', ip6: 'fe80::1%eth0', speed: -1, internal: false, virtual: false },
        { iface: 'ib0', mac: '', ip4: '10.0.0.5', ip6: '', speed: 100000, internal: false, virtual: false },
        { iface: 'tb1234', mac: '02:fc:00:00:00:09', ip4: '10.64.0.1', ip6: '', speed: null, internal: false, virtual: true },
        { iface: 'veth1a2b', mac: '02:fc:00:00:00:0a', ip4: '', ip6: '', speed: 10000, internal: false, virtual: true },
      ]),
    ).toEqual([
      { name: 'eth0', mac: '02:fc:00:00:00:01', addresses: ['192.0.2.2', 'fe80::1'], speedMbps: null },
      { name: 'ib0', addresses: ['10.0.0.5'], speedMbps: 100000 },
    ]);
  });

  it('lists no container veths or bridges, however many, while the machine has an interface of its own', () => {
    const veths = Array.from({ length: 2000 }, (_, i) => ({
      iface: `veth${i}`,
      mac: '02:fc:00:00:01:01',
      ip4: '',
      ip6: '',
      speed: 10000,
      internal: false,
      virtual: true,
    }));
    const eth0 = { iface: 'eth0', mac: '02:fc:00:00:00:01', ip4: '192.0.2.2', ip6: '', speed: 1000, internal: false, virtual: false };
    expect(toInterfaces([eth0, ...veths]).map((i) => i.name)).toEqual(['eth0']);
    // A node inside a network namespace or a container has only virtual interfaces: those with an address stand.
    const inNamespace = { iface: 'eth1', mac: '02:fc:00:00:00:02', ip4: '10.1.0.2', ip6: '', speed: 10000, internal: false, virtual: true };
    expect(toInterfaces([inNamespace, ...veths]).map((i) => i.name)).toEqual(['eth1']);
  });

  it('discovers this machine as a valid registration inventory (no GPU here)', async () => {
    const inv = await discoverInventory({ gpus: async () => [] });
    expect(await validatePayload(MachineInventory, inv)).toMatchObject({ ok: true });
    expect(inv.memoryBytes).toBeGreaterThan(0);
    expect(inv.cpu.threads).toBeGreaterThan(0);
  });

  it('ignores free disk space when deciding whether the inventory changed', () => {
    const inv = {
      hostname: 'h',
      cpu: { model: 'x', cores: 1, threads: 2 },
      memoryBytes: 1,
      disks: [{ mount: '/', fsType: 'ext4', sizeBytes: 10, freeBytes: 5 }],
      os: { platform: 'linux', distro: 'd', release: 'r', kernel: 'k', arch: 'x64' },
      networkInterfaces: [],
      gpus: [],
    };
    expect(inventoryFingerprint({ ...inv, disks: [{ ...inv.disks[0], freeBytes: 1 }] })).toBe(inventoryFingerprint(inv));
    expect(inventoryFingerprint({ ...inv, gpus: [{ index: 0, vendor: 'nvidia', model: 'm', memoryMiB: 1, driverVersion: 'd' }] })).not.toBe(
      inventoryFingerprint(inv),
    );
  });
});
