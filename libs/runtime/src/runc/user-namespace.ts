import { readFile, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { execa } from 'execa';
import type { UserNamespaceMapping } from '../oci/config-builder.js';

/**
 * Why containers cannot get their own user namespace on this host, or undefined when they can:
 * the kernel allows them (user.max_user_namespaces > 0, and `unshare --user` works), the
 * range fits in 32-bit ids, and the mapped root can walk to the image store (every ancestor of
 * `imagesRoot` searchable by others: a 0700 directory such as /root stops pivot_root).
 */
export async function userNamespaceRefusal(mapping: UserNamespaceMapping, imagesRoot: string): Promise<string | undefined> {
  if (!Number.isInteger(mapping.hostId) || mapping.hostId < 1 || mapping.size < 65_536 || mapping.hostId + mapping.size > 2 ** 32 - 1) {
    return `host id range ${mapping.hostId}+${mapping.size} must start above 0, hold at least 65536 ids and end below 2^32-1`;
  }
  const max = await readFile('/proc/sys/user/max_user_namespaces', 'utf8').catch(() => undefined);
  if (max === undefined) return 'the kernel has no user namespaces (/proc/sys/user/max_user_namespaces is missing)';
  if (Number(max.trim()) === 0) return 'the kernel refuses user namespaces (user.max_user_namespaces = 0)';
  const probe = await execa('unshare', ['--user', 'true'], { reject: false, stdin: 'ignore', all: true });
  if (probe.exitCode !== 0) return `unshare --user failed: ${(probe.all ?? '').trim() || `exit ${probe.exitCode}`}`;
  for (let dir = imagesRoot; ; dir = dirname(dir)) {
    const s = await stat(dir).catch(() => undefined);
    if (s && (s.mode & 0o001) === 0)
      return `${dir} is not searchable by other users, so the mapped root cannot reach the image store (chmod o+x it)`;
    if (dir === dirname(dir)) return undefined;
  }
}
