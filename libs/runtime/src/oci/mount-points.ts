import { mkdir, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { OciMount } from './oci-spec.js';

/**
 * Creates, as the host's root, the mount points config.json needs in a shared rootfs. runc
 * makes missing ones itself, but inside a user namespace it is an unprivileged host user that
 * cannot write a root-owned rootfs. Points under an earlier mount (a tmpfs such as /dev or
 * /tmp) are runc's to make; a file source gets an empty file, anything else a directory.
 * Idempotent and safe with concurrent starts on the same rootfs.
 */
export async function ensureMountPoints(rootfs: string, mounts: readonly OciMount[]): Promise<void> {
  const earlier: string[] = [];
  for (const m of mounts) {
    const underEarlier = earlier.some((d) => m.destination.startsWith(`${d}/`));
    earlier.push(m.destination.replace(/\/+$/, ''));
    if (underEarlier || m.destination === '/') continue;
    const point = join(rootfs, m.destination);
    if (await stat(point).catch(() => undefined)) continue;
    const source = m.source && (m.type === 'bind' || m.type === 'none') ? await stat(m.source).catch(() => undefined) : undefined;
    if (source && !source.isDirectory()) {
      await mkdir(dirname(point), { recursive: true, mode: 0o755 });
      await writeFile(point, '', { flag: 'a', mode: 0o644 });
    } else {
      await mkdir(point, { recursive: true, mode: 0o755 });
    }
  }
}
