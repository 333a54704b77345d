import { spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT, SERVICE_MAIN } from './paths.mjs';
import { isPortFree, freePort } from './net.mjs';
import { procStart, stopProcess } from './proc.mjs';
import { rotate } from './logs.mjs';

/** Exits that the same environment would repeat: sysexits' EX_NOPERM (the agent's token refused) and EX_CONFIG. */
const PERMANENT_EXITS = { 77: 'refused by the gateway', 78: 'invalid configuration' };
const MIN_BACKOFF_MS = 1_000;
const MAX_BACKOFF_MS = 30_000;
/** A child that stayed up this long gets its back-off reset. */
const STABLE_MS = 30_000;

/** Next back-off: doubles while a child keeps crashing, starts over once it ran for a while. */
export function nextBackoff(previousMs, uptimeMs) {
  if (!previousMs || uptimeMs >= STABLE_MS) return MIN_BACKOFF_MS;
  return Math.min(previousMs * 2, MAX_BACKOFF_MS);
}

/**
 * Keeps the Tern services running as child processes: each detached in its own process group
 * (Ctrl-C in the terminal reaches only `up`, which stops them in order), output appended to
 * <logs>/<name>.log, restarted after a back-off when it exits unexpectedly. A child that exits
 * with 77 or 78 (refused, bad configuration) is not restarted: the same env would fail the same way.
 */
export class Supervisor {
  constructor({ logsDir, log, onChange }) {
    this.logsDir = logsDir;
    this.log = log;
    this.onChange = onChange ?? (() => {});
    this.children = new Map();
    this.stopping = false;
    this.claimedPorts = new Set();
  }

  add(name, { env, port, fixedPort = false }) {
    this.children.set(name, { name, env, port, fixedPort, restarts: 0, backoff: 0, status: 'starting' });
    if (port) this.claimedPorts.add(port);
  }

  logFile(name) {
    return join(this.logsDir, `${name}.log`);
  }

  startAll() {
    for (const name of this.children.keys()) this.spawn(name);
  }

  spawn(name) {
    const c = this.children.get(name);
    rotate(this.logFile(name));
    const out = openSync(this.logFile(name), 'a');
    const env = { ...c.env, ...(c.port !== undefined ? { HTTP_PORT: String(c.port) } : {}) };
    const proc = spawn(process.execPath, [SERVICE_MAIN(name)], { cwd: REPO_ROOT, env, detached: true, stdio: ['ignore', out, out] });
    closeSync(out);
    c.proc = proc;
    c.pid = proc.pid;
    c.start = procStart(proc.pid);
    c.startedAt = Date.now();
    c.status = 'running';
    proc.once('error', (e) => this.log(`${name}: could not start: ${e.message}`));
    proc.once('exit', (code, sig) => this.exited(name, code, sig));
    this.onChange();
  }

  exited(name, code, sig) {
    const c = this.children.get(name);
    c.proc = undefined;
    c.lastExit = sig ? `signal ${sig}` : `code ${code}`;
    if (this.stopping) {
      c.status = 'stopped';
      return;
    }
    if (PERMANENT_EXITS[code]) {
      c.status = 'failed';
      c.failure = PERMANENT_EXITS[code];
      this.log(`${name} exited with code ${code} (${c.failure}); not restarting. See ${this.logFile(name)}`);
      this.onChange();
      return;
    }
    const uptime = Date.now() - c.startedAt;
    c.backoff = nextBackoff(c.backoff, uptime);
    c.status = 'restarting';
    this.log(
      `${name} (pid ${c.pid}) exited unexpectedly (${c.lastExit}) after ${(uptime / 1000).toFixed(1)}s; restarting in ${c.backoff / 1000}s`,
    );
    this.onChange();
    c.timer = setTimeout(() => this.restart(name).catch((e) => this.log(`${name}: restart failed: ${e.message}`)), c.backoff);
  }

  async restart(name) {
    const c = this.children.get(name);
    c.timer = undefined;
    if (this.stopping) return;
    // Another program may have taken the port meanwhile; only the gateway's is promised to users.
    if (c.port && !c.fixedPort && !(await isPortFree(c.port))) {
      this.claimedPorts.delete(c.port);
      c.port = await freePort(this.claimedPorts);
      this.claimedPorts.add(c.port);
    }
    c.restarts += 1;
    this.spawn(name);
    this.log(`${name} restarted (pid ${c.pid})`);
  }

  /** pid, port, status of each child, for run.json. */
  snapshot() {
    return Object.fromEntries(
      [...this.children.values()].map((c) => [
        c.name,
        {
          pid: c.pid,
          start: c.start,
          port: c.port,
          status: c.status,
          restarts: c.restarts,
          lastExit: c.lastExit,
          log: this.logFile(c.name),
        },
      ]),
    );
  }

  /** Children that exited for good, with why: `agent (refused by the gateway)`. */
  failed() {
    return [...this.children.values()].filter((c) => c.status === 'failed').map((c) => `${c.name} (${c.failure})`);
  }

  /** SIGTERM to every child, SIGKILL (whole group) after graceMs. */
  async stopAll(graceMs = 10_000) {
    this.stopping = true;
    for (const c of this.children.values()) clearTimeout(c.timer);
    await Promise.all(
      [...this.children.values()].map(async (c) => {
        if (!c.proc) return;
        const how = await stopProcess({ pid: c.pid, start: c.start }, graceMs);
        c.status = 'stopped';
        if (how === 'killed') this.log(`${c.name} did not stop within ${graceMs / 1000}s; killed`);
      }),
    );
  }

  /** Kill -9 every child now (second Ctrl-C). */
  killAll() {
    this.stopping = true;
    for (const c of this.children.values()) {
      clearTimeout(c.timer);
      if (c.proc) {
        try {
          process.kill(-c.pid, 'SIGKILL');
        } catch {
          /* gone */
        }
      }
    }
  }
}
