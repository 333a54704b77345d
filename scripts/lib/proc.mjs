import { spawn } from 'node:child_process';
import { accessSync, constants, readFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Runs a command to completion. `capture` collects stdout+stderr (printed by the caller on
 * failure); otherwise output goes to the terminal. Resolves { code, output }, never rejects
 * on a non-zero exit (rejects only when the command cannot start).
 */
export function run(cmd, args = [], { capture = false, env, cwd, input } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, {
      cwd,
      env: env ?? process.env,
      stdio: [input === undefined ? 'ignore' : 'pipe', capture ? 'pipe' : 'inherit', capture ? 'pipe' : 'inherit'],
    });
    let output = '';
    if (capture) {
      child.stdout.on('data', (d) => (output += d));
      child.stderr.on('data', (d) => (output += d));
    }
    if (input !== undefined) child.stdin.end(input);
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code: code ?? (signal ? 128 : 1), signal, output }));
  });
}

/** Full path of an executable on PATH (plus the sbin dirs a non-root PATH may lack), or undefined. */
export function which(bin, extraDirs = ['/usr/local/sbin', '/usr/sbin', '/sbin']) {
  const dirs = [...(process.env.PATH ?? '').split(delimiter).filter(Boolean), ...extraDirs];
  for (const dir of dirs) {
    const p = join(dir, bin);
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      /* next */
    }
  }
  return undefined;
}

/** Start time of a process in clock ticks since boot (Linux), so a reused pid is not mistaken for ours. */
export function procStart(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

export function isAlive(pid) {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
  } catch (e) {
    return e.code === 'EPERM';
  }
  // A zombie still answers kill(0); it is dead for our purposes.
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return true;
  }
}

/** True when { pid, start } recorded earlier is still that same process. */
export function isSameProcess(rec) {
  if (!rec?.pid || !isAlive(rec.pid)) return false;
  if (!rec.start) return true;
  const now = procStart(rec.pid);
  return now === undefined || now === rec.start;
}

export function signal(pid, sig, group = false) {
  try {
    process.kill(group ? -pid : pid, sig);
    return true;
  } catch {
    return false;
  }
}

export async function waitGone(pid, ms) {
  const deadline = Date.now() + ms;
  while (isAlive(pid)) {
    if (Date.now() >= deadline) return false;
    await sleep(100);
  }
  return true;
}

/**
 * SIGTERM, then SIGKILL to the whole process group after `graceMs`. Children are started
 * detached (their own group), so the group kill also reaps anything they spawned.
 */
export async function stopProcess(rec, graceMs = 10_000) {
  if (!isSameProcess(rec)) return 'gone';
  signal(rec.pid, 'SIGTERM');
  if (await waitGone(rec.pid, graceMs)) {
    signal(rec.pid, 'SIGKILL', true); // leftovers in its group, if any
    return 'stopped';
  }
  if (!signal(rec.pid, 'SIGKILL', true)) signal(rec.pid, 'SIGKILL');
  await waitGone(rec.pid, 5_000);
  return 'killed';
}

export function isRoot() {
  return typeof process.getuid === 'function' && process.getuid() === 0;
}

/** uid/gid of a local user from /etc/passwd, or undefined. */
export function lookupUser(name) {
  try {
    for (const line of readFileSync('/etc/passwd', 'utf8').split('\n')) {
      const [user, , uid, gid] = line.split(':');
      if (user === name) return { uid: Number(uid), gid: Number(gid) };
    }
  } catch {
    /* no passwd file */
  }
  return undefined;
}
