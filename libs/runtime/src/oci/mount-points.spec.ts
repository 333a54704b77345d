import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureMountPoints } from './mount-points.js';

describe('ensureMountPoints', () => {
  it('makes directories and files for binds, leaves points under earlier mounts to runc, and is idempotent', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tern-mp-'));
    const rootfs = join(dir, 'rootfs');
    const file = join(dir, 'lib.so');
    writeFileSync(file, 'x');
    const mounts = [
      { destination: '/dev', type: 'tmpfs', source: 'tmpfs' },
      { destination: '/dev/nvidia0', type: 'bind', source: '/dev/null' },
      { destination: '/data', type: 'bind', source: dir },
      { destination: '/usr/local/nvidia/lib64/lib.so', type: 'bind', source: file },
    ];
    try {
      await ensureMountPoints(rootfs, mounts);
      await ensureMountPoints(rootfs, mounts);
      expect(statSync(join(rootfs, 'dev')).isDirectory()).toBe(true);
      expect(() => statSync(join(rootfs, 'dev', 'nvidia0'))).toThrow();
      expect(statSync(join(rootfs, 'data')).isDirectory()).toBe(true);
      expect(statSync(join(rootfs, 'usr/local/nvidia/lib64/lib.so')).isFile()).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
