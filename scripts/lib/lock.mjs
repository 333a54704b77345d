import { openSync, writeSync, closeSync, unlinkSync } from 'node:fs';
import { readJson } from './state.mjs';
import { isSameProcess, procStart } from './proc.mjs';

/** The running supervisor recorded in the lock file, or undefined (no file, or its process is gone). */
export function runningSupervisor(lockPath) {
  let rec;
  try {
    rec = readJson(lockPath);
  } catch {
    return undefined;
  }
  return rec && isSameProcess(rec) ? rec : undefined;
}

/**
 * Takes the lock (exclusive create) for this process. Returns the holder's record instead when
 * another live supervisor has it; a stale lock from a dead one is replaced.
 */
export function acquireLock(lockPath) {
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fd = openSync(lockPath, 'wx', 0o644);
      writeSync(fd, JSON.stringify({ pid: process.pid, start: procStart(process.pid), since: new Date().toISOString() }));
      closeSync(fd);
      return undefined;
    } catch (e) {
      if (e.code !== 'EEXIST') throw e;
      const holder = runningSupervisor(lockPath);
      if (holder) return holder;
      try {
        unlinkSync(lockPath);
      } catch {
        /* someone else removed it */
      }
    }
  }
  throw new Error(`could not take ${lockPath}`);
}

export function releaseLock(lockPath) {
  const rec = runningSupervisor(lockPath);
  if (!rec || rec.pid === process.pid) {
    try {
      unlinkSync(lockPath);
    } catch {
      /* already gone */
    }
  }
}
