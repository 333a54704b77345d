/**
 * `node --cpu-prof` for a window of a process someone else starts (NODE_OPTIONS refuses
 * --cpu-prof): this preload starts V8's profiler through node:inspector on a SIGWINCH and, on the
 * next SIGWINCH, writes `<TERN_CPU_PROFILE_DIR>/<app>-<pid>-<n>.cpuprofile`. Only processes whose
 * main script path contains one of TERN_CPU_PROFILE_MATCH (comma-separated, default
 * `apps/gateway`) listen. `e2e.js --profile DIR` uses it around the gateway's load.
 *
 *   NODE_OPTIONS="--import=$PWD/bench/invoke/cpu-profile.mjs" TERN_CPU_PROFILE_DIR=/tmp/prof node dist/apps/gateway/src/main.js
 *   kill -WINCH <pid>; …load…; kill -WINCH <pid>
 */
import { Session } from 'node:inspector';
import { writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';

const dir = process.env.TERN_CPU_PROFILE_DIR;
const matches = (process.env.TERN_CPU_PROFILE_MATCH ?? 'apps/gateway').split(',').filter(Boolean);
const script = process.argv[1] ?? '';
const app = /apps\/([^/]+)\//.exec(script)?.[1] ?? basename(script, '.js');

// Not SIGUSR2: Nest's shutdown hooks take that one (and every other signal that ends a process).
if (dir && matches.some((m) => script.includes(m))) {
  const session = new Session();
  session.connect();
  session.post('Profiler.enable');
  let running = false;
  let written = 0;
  process.on('SIGWINCH', () => {
    if (!running) {
      session.post('Profiler.start');
      running = true;
      return;
    }
    running = false;
    session.post('Profiler.stop', (err, result) => {
      if (err) return process.stderr.write(`cpu-profile: ${err.message}\n`);
      writeFileSync(join(dir, `${app}-${process.pid}-${++written}.cpuprofile`), JSON.stringify(result.profile));
    });
  });
}
