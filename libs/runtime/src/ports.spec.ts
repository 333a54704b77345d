import { createServer } from 'node:net';
import { ephemeralPorts, freePort, portRange } from './ports.js';

describe('freePort', () => {
  it('draws outside the range the kernel takes outgoing connections from', async () => {
    const [low, high] = ephemeralPorts();
    for (let i = 0; i < 20; i++) {
      const port = await freePort();
      expect(port < low || port > high).toBe(true);
    }
  });

  it('never hands out the same port twice, nor one in avoid, nor one something listens on', async () => {
    const taken = createServer();
    const [low, high] = portRange(ephemeralPorts());
    await new Promise<void>((r) => taken.listen(low, '0.0.0.0', r));
    try {
      const avoid = new Set([low + 1, low + 2]);
      const seen = new Set<number>();
      for (let i = 0; i < 50; i++) {
        const port = await freePort(avoid);
        expect(port).toBeGreaterThanOrEqual(low);
        expect(port).toBeLessThanOrEqual(high);
        expect(avoid.has(port) || port === low || seen.has(port)).toBe(false);
        seen.add(port);
      }
    } finally {
      taken.close();
    }
  });

  it("reads the kernel's range, and falls back to Linux's default", () => {
    expect(ephemeralPorts('32768\t60999\n')).toEqual([32768, 60999]);
    expect(ephemeralPorts('1024 65535')).toEqual([1024, 65535]);
    expect(ephemeralPorts(undefined)).toEqual([32768, 60999]);
    expect(portRange([32768, 60999])).toEqual([10000, 32767]);
    expect(portRange([1024, 40000])).toEqual([40001, 65535]);
    expect(portRange([1024, 65000])).toEqual([10000, 65535]);
  });
});
