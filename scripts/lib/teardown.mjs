import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { readJson } from './state.mjs';
import { isAlive, stopProcess } from './proc.mjs';
import { stopPostgres } from './postgres.mjs';

/** A pid from a pid file, only when that process still is a nats-server (pids get reused). */
function natsFromPidFile(dir) {
  try {
    const pid = Number(readFileSync(join(dir, 'nats.pid'), 'utf8').trim());
    const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    return pid && isAlive(pid) && cmd.includes('nats-server') && cmd.includes(dir) ? { pid } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Stops everything recorded in run.json (services, private NATS and Postgres) without the
 * supervisor: used by `down` when the supervisor is gone and by `up` before it starts again.
 * Returns the names of what it stopped.
 */
export async function stopRecorded(f, log = () => {}) {
  const run = readJson(f.run, {}) ?? {};
  const state = readJson(f.state, {}) ?? {};
  const stopped = [];
  await Promise.all(
    Object.entries(run.services ?? {}).map(async ([name, rec]) => {
      const how = await stopProcess(rec, 10_000);
      if (how !== 'gone') {
        stopped.push(name);
        log(`${name} (pid ${rec.pid}) ${how}`);
      }
    }),
  );
  const nats = run.nats?.pid ? run.nats : natsFromPidFile(f.nats);
  if (nats && (await stopProcess(nats, 10_000)) !== 'gone') {
    stopped.push('nats');
    log(`private NATS (pid ${nats.pid}) stopped`);
  }
  if (run.registry?.pid && (await stopProcess(run.registry, 10_000)) !== 'gone') {
    stopped.push('registry');
    log(`private registry (pid ${run.registry.pid}) stopped`);
  }
  const pgDir = run.postgres?.dir ?? state.postgresDir;
  if (pgDir && (await stopPostgres(pgDir))) {
    stopped.push('postgres');
    log('private PostgreSQL stopped');
  }
  rmSync(f.run, { force: true });
  return stopped;
}
