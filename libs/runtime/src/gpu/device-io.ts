import { readdir, readFile, stat } from 'node:fs/promises';
import { execa } from 'execa';
import { exists } from '../fs-exists.js';

export interface DeviceNumbers {
  major: number;
  minor: number;
  /** 'c' or 'b'. */
  type: 'c' | 'b';
}

/** What GPU discovery reads from the host, injectable so tests can describe a fake machine. */
export interface HostIo {
  readdir(dir: string): Promise<string[]>;
  readFile(path: string): Promise<string>;
  exists(path: string): Promise<boolean>;
  /** Major/minor of a device node; undefined when it is missing or not a device. */
  statDevice(path: string): Promise<DeviceNumbers | undefined>;
  /** `ldconfig -p`; empty when ldconfig is unavailable. */
  ldconfig(): Promise<string>;
}

export const nodeHostIo: HostIo = {
  readdir: (dir) => readdir(dir).catch(() => []),
  readFile: (path) => readFile(path, 'utf8'),
  exists,
  async statDevice(path) {
    const s = await stat(path, { bigint: true }).catch(() => undefined);
    if (!s || !(s.isCharacterDevice() || s.isBlockDevice())) return undefined;
    return { ...splitDev(s.rdev), type: s.isCharacterDevice() ? 'c' : 'b' };
  },
  async ldconfig() {
    for (const bin of ['/sbin/ldconfig', '/usr/sbin/ldconfig', 'ldconfig']) {
      const r = await execa(bin, ['-p'], { reject: false });
      if (r.exitCode === 0) return r.stdout;
    }
    return '';
  },
};

/** glibc's gnu_dev_major/gnu_dev_minor. */
export function splitDev(rdev: bigint): { major: number; minor: number } {
  const major = Number(((rdev >> 8n) & 0xfffn) | ((rdev >> 32n) & 0xfffff000n));
  const minor = Number((rdev & 0xffn) | ((rdev >> 12n) & 0xffffff00n));
  return { major, minor };
}
