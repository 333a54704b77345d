#!/usr/bin/env node
// `npm run down`: stops what `npm run up` started. Idempotent. Plain Node, builtins only.
import { existsSync, rmSync } from 'node:fs';
import { main, ok, step, warn } from './lib/log.mjs';
import { stateDir } from './lib/paths.mjs';
import { files } from './lib/state.mjs';
import { runningSupervisor } from './lib/lock.mjs';
import { signal, waitGone } from './lib/proc.mjs';
import { stopRecorded } from './lib/teardown.mjs';

/** Children get 10 s before SIGKILL, then Postgres and NATS stop: the supervisor needs well under this. */
const SUPERVISOR_GRACE_MS = 45_000;

await main(async () => {
  const f = files(stateDir());
  if (!existsSync(f.dir)) {
    ok('Nothing to stop (no state dir)');
    return 0;
  }
  const sup = runningSupervisor(f.lock);
  if (sup) {
    step(`Stopping the supervisor (pid ${sup.pid})`);
    signal(sup.pid, 'SIGTERM');
    if (!(await waitGone(sup.pid, SUPERVISOR_GRACE_MS))) {
      warn(`supervisor still running after ${SUPERVISOR_GRACE_MS / 1000}s; killing it and what it started`);
      signal(sup.pid, 'SIGKILL');
      await waitGone(sup.pid, 5_000);
    }
  }
  // Whatever the supervisor did not get to (or everything, when it had been killed).
  const stopped = await stopRecorded(f, (msg) => step(msg));
  rmSync(f.lock, { force: true });
  if (sup || stopped.length) ok('Tern stopped');
  else ok('Nothing was running');
  return 0;
});
