import { spawn } from 'node:child_process';
import { mkdirSync, openSync, closeSync } from 'node:fs';
import { join } from 'node:path';
import { urlHost } from './exposure.mjs';
import { step, UserError, warn } from './log.mjs';
import { natsReachable } from './net.mjs';
import { isSameProcess, procStart, sleep, stopProcess, which } from './proc.mjs';
import { tail } from './logs.mjs';
import { prepareServer } from './nats-auth.mjs';
import { adoptAnonymousStreams } from './nats-upgrade.mjs';

/**
 * Starts a private `nats-server` with JetStream in operator mode on host:port (loopback unless
 * `npm run up --public` asks for more) with its store, operator material and config under `dir`
 * (see nats-auth.mjs: no anonymous access, each principal its own user), detached (its own
 * process group, so Ctrl-C in the terminal reaches only the supervisor, which stops it in order).
 * Resolves { pid, start, port, url, child } once it greets clients; `url` is how this machine
 * reaches it (at `localHost`). With `tls` ({ certFile, keyFile }) every client must speak TLS.
 * `monitor` ({ httpPort, profPort }) opens its monitoring endpoints and Go pprof on loopback.
 * A member of a cluster (bench/agents' `--nats-servers`) names the first member's operator
 * material (`operatorDir`, so every member trusts the same users), its own `serverName` and its
 * `cluster` ({ name, port, routes }).
 * @param {{ dir: string, port: number, logFile: string, host?: string, localHost?: string, tls?: { certFile: string, keyFile: string }, monitor?: { httpPort: number, profPort: number }, operatorDir?: string, serverName?: string, cluster?: { name: string, port: number, routes: string[] } }} options
 */
export async function startNats({
  dir,
  port,
  logFile,
  host = '127.0.0.1',
  localHost = host,
  tls,
  monitor,
  operatorDir,
  serverName,
  cluster,
}) {
  const bin = which('nats-server');
  if (!bin) throw new UserError('nats-server not found (apt-get install nats-server, or set NATS_URL)');
  mkdirSync(dir, { recursive: true });
  const f = await prepareServer(dir, { host, port, tls, monitor, operatorDir, serverName, cluster });
  sayAdopted(adoptAnonymousStreams(f.store, f.accountPublicKey));
  const out = openSync(logFile, 'a');
  const child = spawn(bin, ['-c', f.config, '-P', join(dir, 'nats.pid')], { detached: true, stdio: ['ignore', out, out] });
  closeSync(out);
  let exited;
  child.once('exit', (code, sig) => (exited = sig ?? code));
  const url = `nats://${urlHost(localHost)}:${port}`;
  const deadline = Date.now() + 15_000;
  while (!(await natsReachable(url))) {
    if (exited !== undefined || Date.now() > deadline) {
      if (exited === undefined) child.kill('SIGKILL');
      throw new UserError(`private NATS did not start on port ${port}; ${logFile}:\n${tail(logFile, 15)}`);
    }
    await sleep(100);
  }
  return { pid: child.pid, start: procStart(child.pid), port, url, child };
}

/** What upgrading a store from before operator mode did, and what is left to the user. */
function sayAdopted({ moved, conflicts, from, to }) {
  if (moved.length) {
    step(`Moved ${moved.length} NATS stream(s) of a .tern/ from before operator mode into the Tern account: ${moved.join(', ')}`);
  }
  if (!conflicts.length) return;
  warn(
    [
      `${conflicts.length} NATS stream(s) from before operator mode were not moved into the Tern account, which has streams`,
      `  of the same names already (this version started on this .tern/ before, with them looking gone): ${conflicts.join(', ')}`,
      `  The old ones, with your tasks, deployments and code, are in ${from}/; the new ones in ${to}/.`,
      '  To get the old ones back: npm run down, remove the new ones of those names from the second folder, npm run up',
      '  (it moves the old ones in). To keep the new ones instead: remove the first folder.',
    ].join('\n'),
  );
}

export async function stopNats(rec) {
  if (rec && isSameProcess(rec)) await stopProcess(rec, 10_000);
}
