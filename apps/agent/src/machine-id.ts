import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';

/**
 * A stable id for this machine when MACHINE_ID is not set: the host name plus a short hash
 * of /etc/machine-id, so two hosts with the same name still differ.
 */
export function defaultMachineId(): string {
  let seed = hostname();
  try {
    seed = readFileSync('/etc/machine-id', 'utf8').trim() || seed;
  } catch {
    /* no machine-id (macOS, some containers): the host name alone */
  }
  const name =
    hostname()
      .toLowerCase()
      .replace(/[^a-z0-9-]/g, '-')
      .slice(0, 48) || 'machine';
  return `${name}-${createHash('sha256').update(seed).digest('hex').slice(0, 8)}`;
}
