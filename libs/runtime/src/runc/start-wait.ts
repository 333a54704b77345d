import { setTimeout as sleep } from 'node:timers/promises';

/** What the shim leaves in a bundle while runc starts a container (see SHIM_SCRIPT). */
export interface StartFiles {
  /** The pid runc wrote once the container's process exists; undefined before. */
  pid(): Promise<number | undefined>;
  /** runc's exit status, written by the shim once runc returned; undefined while runc runs. */
  exitStatus(): Promise<string | undefined>;
}

export type StartOutcome = { started: true; pid: number } | { started: false; reason: string };

/**
 * Waits until runc has the container's process running, or has given up.
 *
 * The exit file is read before the pid file, never after: runc writes the pid file before the
 * process runs, so once the exit file is there the pid file is final. Read the other way round,
 * a program that ran and exited between the two reads (`true`, a failing import) looked like a
 * start runc refused.
 */
export async function awaitStart(files: StartFiles, timeoutMs: number, pollMs = 5): Promise<StartOutcome> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const exitStatus = await files.exitStatus();
    const pid = await files.pid();
    if (pid !== undefined) return { started: true, pid };
    if (exitStatus !== undefined) return { started: false, reason: `runc exited with status ${exitStatus}` };
    if (Date.now() >= deadline) return { started: false, reason: 'timed out waiting for runc to start the process' };
    await sleep(pollMs);
  }
}
