import { spawn } from 'node:child_process';
import { mkdirSync, openSync, closeSync } from 'node:fs';
import { join } from 'node:path';
import { urlHost } from './exposure.mjs';
import { UserError } from './log.mjs';
import { natsReachable } from './net.mjs';
import { isSameProcess, procStart, sleep, stopProcess, which } from './proc.mjs';
import { tail } from './logs.mjs';

/**
 * Starts a private `nats-server -js` on host:port (loopback unless `npm run up --public` asks
 * for more) with its store under `dir`, detached (its own process group, so Ctrl-C in the
 * terminal reaches only the supervisor, which stops it in order). Resolves
 * { pid, start, port, url, child } once it greets clients; `url` is how this machine reaches it
 * (at `localHost`). With `tls` ({ certFile, keyFile }) every client must speak TLS.
 */
export async function startNats({ dir, port, logFile, name = 'tern-local', host = '127.0.0.1', localHost = host, tls }) {
  const bin = which('nats-server');
  if (!bin) throw new UserError('nats-server not found (apt-get install nats-server, or set NATS_URL)');
  mkdirSync(join(dir, 'store'), { recursive: true });
  const out = openSync(logFile, 'a');
  const args = ['-js', '-a', host, '-p', String(port), '-n', name, '-sd', join(dir, 'store'), '-P', join(dir, 'nats.pid')];
  // TLS required of every client (the command-line form of a `tls { cert_file, key_file }` block).
  if (tls) args.push('--tls', '--tlscert', tls.certFile, '--tlskey', tls.keyFile);
  const child = spawn(bin, args, {
    detached: true,
    stdio: ['ignore', out, out],
  });
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

export async function stopNats(rec) {
  if (rec && isSameProcess(rec)) await stopProcess(rec, 10_000);
}
