import { constants } from 'node:os';
import type { ExitResult } from '../types.js';

const SIGNAL_NAMES = new Map(Object.entries(constants.signals).map(([name, n]) => [n, name]));

/**
 * runc (and docker-style runtimes) report a process killed by signal n as status 128+n; the
 * container contract reports that as no exit code and the signal's name.
 */
export function exitFromStatus(status: number | null): Pick<ExitResult, 'exitCode' | 'signal'> {
  if (status !== null && status > 128 && status <= 128 + 64) {
    return { exitCode: null, signal: SIGNAL_NAMES.get(status - 128) ?? `SIG${status - 128}` };
  }
  return { exitCode: status };
}
