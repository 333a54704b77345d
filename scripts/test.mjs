#!/usr/bin/env node
// `npm test`: dependencies, lint (whole suite only), build, Postgres for the integration tests (the machine's
// own, or a private one under .tern/test-infra), then jest; jest's global setup starts the run's own NATS
// in operator mode (test/support/global-setup.mjs). Arguments go to jest as they are:
//   npm test -- --selectProjects unit
//   npm test -- test/up.test.ts
import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { dim, main, ok, step, warn } from './lib/log.mjs';
import { REPO_ROOT, stateDir } from './lib/paths.mjs';
import { files, newPassword, readJson, updateJson, writeJson } from './lib/state.mjs';
import { build, ensureNodeModules, ensureSystemPackages, lint } from './lib/setup.mjs';
import { pickPort } from './lib/net.mjs';
import { choosePgDir, startPostgres, stopPostgres } from './lib/postgres.mjs';

const DEFAULT_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/test';

await main(async () => {
  const jestArgs = process.argv.slice(2);
  await ensureNodeModules();
  // The whole suite starts with lint, beside the build (each keeps one core busy); a run of chosen
  // tests (`npm test -- <file>`) skips lint.
  await Promise.all([jestArgs.length ? undefined : lint(), build()]);

  const infra = { pgDir: undefined };
  const f = files(join(stateDir(), 'test-infra'));
  const stopInfra = async () => {
    if (infra.pgDir) await stopPostgres(infra.pgDir);
    infra.pgDir = undefined;
  };
  try {
    const env = { ...process.env };
    if (needsInfra(jestArgs)) {
      // The runtime and agent tests run real containers on private networks (ip, nft), the TLS tests
      // make certificates (openssl), every integration run its own nats-server, the dashboard's
      // browser test drives Chromium and the metrics test runs Prometheus; under CI=true
      // the tests that need a part still missing after this fail (test/support/real-parts.ts).
      await ensureSystemPackages({
        optional: [
          'runc',
          'umoci',
          'nats-server',
          'nftables',
          'iproute2',
          'openssl',
          'docker-registry',
          'apache2-utils',
          'skopeo',
          'debootstrap',
          'zstd',
          'chromium',
          'prometheus',
        ],
      });
      await provideInfra(env, f, infra);
    }
    if (jestArgs.length) return await jest(jestArgs, env);
    // The whole suite in one run, two test files at a time: the stack tests (a whole `npm run up`
    // each) wait on timers and containers more than they compute, so two of them, or one beside
    // an integration test, fit two cores; one run packs them with no idle worker between phases.
    return await jest(['--selectProjects', 'unit', 'integration', 'stack'], env);
  } finally {
    await stopInfra();
  }
});
process.exit(process.exitCode ?? 0);

/** The unit project alone needs no servers. */
function needsInfra(args) {
  const i = args.indexOf('--selectProjects');
  if (i < 0) return true;
  const projects = [];
  for (let j = i + 1; j < args.length && !args[j].startsWith('-'); j++) projects.push(args[j]);
  return projects.includes('integration') || projects.length === 0;
}

async function provideInfra(env, f, infra) {
  const databaseUrl = env.TEST_DATABASE_URL || DEFAULT_DATABASE_URL;
  const pgState = await postgresState(databaseUrl);
  if (pgState === 'ok') {
    ok(`Using PostgreSQL ${redact(databaseUrl)}`);
    env.TEST_DATABASE_URL = databaseUrl;
    return;
  }
  mkdirSync(f.logs, { recursive: true });
  const state = readJson(f.state, {}) ?? {};
  const claimed = new Set();
  if (env.TEST_DATABASE_URL) warn(`TEST_DATABASE_URL=${redact(databaseUrl)}: ${pgState}; starting a private PostgreSQL instead`);
  const creds = readJson(f.credentials, {}) ?? {};
  if (!creds.postgresPassword) {
    creds.postgresPassword = newPassword();
    writeJson(f.credentials, creds, 0o600);
  }
  const port = await pickPort(state.postgresPort, claimed);
  const dir = await choosePgDir(f.dir, state.postgresDir);
  step(`Starting a private PostgreSQL for the tests on 127.0.0.1:${port} ${dim(`(${dir})`)}`);
  infra.pgDir = dir;
  const pg = await startPostgres({
    dir,
    port,
    database: 'test',
    password: creds.postgresPassword,
    logLink: join(f.logs, 'postgres.log'),
  });
  env.TEST_DATABASE_URL = pg.url;
  updateJson(f.state, (s) => ({ ...s, postgresPort: port, postgresDir: dir }));
}

/** 'ok', or why the database cannot be used. Creates the database when only it is missing. */
async function postgresState(url) {
  const { default: pg } = await import('pg');
  const attempt = async (u) => {
    const client = new pg.Client({ connectionString: u, connectionTimeoutMillis: 3_000 });
    try {
      await client.connect();
      await client.query('SELECT 1');
      return client;
    } catch (e) {
      await client.end().catch(() => {});
      throw e;
    }
  };
  try {
    await (await attempt(url)).end();
    return 'ok';
  } catch (e) {
    if (e.code !== '3D000') return `not reachable (${e.code ?? e.message})`;
  }
  // The server answers but the database does not exist: create it.
  const u = new URL(url);
  const name = decodeURIComponent(u.pathname.slice(1));
  u.pathname = '/postgres';
  try {
    const admin = await attempt(u.toString());
    await admin.query(`CREATE DATABASE "${name.replace(/"/g, '""')}"`).catch((e) => {
      if (e.code !== '42P04') throw e; // created meanwhile
    });
    await admin.end();
    step(`Created database ${name}`);
    return 'ok';
  } catch (e) {
    return `database missing and could not be created (${e.message})`;
  }
}

function redact(url) {
  return url.replace(/\/\/([^:/@]+):[^@]*@/, '//$1:***@');
}

/** Runs jest in ESM mode; resolves its exit code. Ctrl-C reaches jest (same process group) and us. */
function jest(args, env) {
  const workers = args.some((a) => /^(--maxWorkers|-w|--runInBand|-i$)/.test(a)) ? [] : ['--maxWorkers=2'];
  const child = spawn(
    process.execPath,
    ['--experimental-vm-modules', join(REPO_ROOT, 'node_modules', 'jest', 'bin', 'jest.js'), ...workers, ...args],
    { cwd: REPO_ROOT, env, stdio: 'inherit' },
  );
  const forward = (sig) => child.kill(sig);
  process.on('SIGINT', () => {}); // jest gets the terminal's SIGINT itself; we wait for it, then stop the servers
  process.on('SIGTERM', forward);
  return new Promise((resolve) => child.on('close', (code, sig) => resolve(code ?? (sig ? 130 : 1))));
}
