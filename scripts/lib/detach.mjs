import { spawn } from 'node:child_process';
import { closeSync, openSync, readSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readJson } from './state.mjs';
import { sleep } from './proc.mjs';
import { rotate } from './logs.mjs';

function size(path) {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}

/** Copies what was appended to `path` since `pos` to stdout; returns the new position. */
function relay(path, pos) {
  const end = size(path);
  if (end <= pos) return end < pos ? 0 : pos;
  const buf = Buffer.alloc(end - pos);
  const fd = openSync(path, 'r');
  try {
    readSync(fd, buf, 0, buf.length, pos);
  } finally {
    closeSync(fd);
  }
  process.stdout.write(buf);
  return end;
}

/**
 * `up --detach`: runs the supervisor as a background process (own session, output to
 * <logs>/up.log) with the other arguments, relays its output until it reports ready or exits,
 * then returns: 0 once ready, else non-zero (the supervisor stopped before it was ready).
 */
export async function detach(f, args = []) {
  const logFile = join(f.logs, 'up.log');
  rotate(logFile);
  let pos = size(logFile);
  const out = openSync(logFile, 'a');
  const script = fileURLToPath(new URL('../up.mjs', import.meta.url));
  const child = spawn(process.execPath, [script, ...args], {
    detached: true,
    stdio: ['ignore', out, out],
    env: { ...process.env, TERN_UP_DETACHED: '1' },
  });
  closeSync(out);
  child.unref();
  let exited;
  child.once('exit', (code, sig) => (exited = code ?? (sig ? 1 : 0)));
  for (;;) {
    pos = relay(logFile, pos);
    const run = (() => {
      try {
        return readJson(f.run, {});
      } catch {
        return {}; // caught mid-write
      }
    })();
    if (run?.ready && run.supervisor?.pid === child.pid) {
      await sleep(300);
      relay(logFile, pos);
      console.log(`The supervisor runs in the background (pid ${child.pid}); its output goes to ${logFile}`);
      return 0;
    }
    if (exited !== undefined) {
      await sleep(100);
      relay(logFile, pos);
      if (exited !== 0) return exited;
      // Stopped by a signal or `npm run down` while starting: not up, so not a success.
      console.error(`The supervisor (pid ${child.pid}) stopped before Tern was ready; see ${logFile}`);
      return 1;
    }
    await sleep(200);
  }
}
