#!/usr/bin/env node
// `npm run up`: everything Tern needs on this machine, then the six services under supervision.
// Plain Node (builtins only) so it runs before `npm ci`. See scripts/README.md.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { join, relative } from 'node:path';
import { bold, cyan, dim, error, green, main, ok, step, UserError, warn, yellow } from './lib/log.mjs';
import { CONTROL_PLANE, REPO_ROOT, SERVICES, SERVICE_MAIN, WITH_DATABASE, stateDir } from './lib/paths.mjs';
import { files, loadCredentials, newPassword, readJson, updateJson, writeJson } from './lib/state.mjs';
import { signal, which } from './lib/proc.mjs';
import { ensureNodeModules, ensureSystemPackages, build } from './lib/setup.mjs';
import { acquireLock, releaseLock, runningSupervisor } from './lib/lock.mjs';
import { stopRecorded } from './lib/teardown.mjs';
import { isPortFree, pickPort } from './lib/net.mjs';
import { startNats, stopNats } from './lib/nats.mjs';
import { startRegistry, stopRegistry, TOKEN_ISSUER, TOKEN_REALM_PATH, TOKEN_SERVICE } from './lib/registry.mjs';
import { natsAuthFiles, writeCreds } from './lib/nats-auth.mjs';
import { choosePgDir, startPostgres, stopPostgres } from './lib/postgres.mjs';
import { Supervisor } from './lib/supervisor.mjs';
import { notUp, waitReady } from './lib/health.mjs';
import { tail } from './lib/logs.mjs';
import { writeCliContext } from './lib/cli-config.mjs';
import { detach } from './lib/detach.mjs';
import { exposure, urlHost } from './lib/exposure.mjs';

const HELP = `Usage: npm run up [-- --detach] [--public ADDRESS] [--tls-cert FILE --tls-key FILE [--tls-ca FILE]]

Installs what is missing, builds, starts NATS and PostgreSQL (private ones under .tern/ unless
NATS_URL / DATABASE_URL are set), then the six Tern services and a local agent, and supervises
them in the foreground. Ctrl-C (or npm run down) stops everything.

  --detach   run the supervisor in the background (output in .tern/logs/up.log); return when ready
  --public ADDRESS
             let machines elsewhere join: bind the gateway and the private NATS where others
             reach them (ADDRESS itself when this machine holds it, else every interface) and
             hand ADDRESS to agents at registration (also TERN_PUBLIC_ADDRESS). Without it
             everything listens on 127.0.0.1 only.
  --tls-cert FILE --tls-key FILE [--tls-ca FILE]
             the gateway serves HTTPS and the private NATS requires TLS with this certificate
             (it must name ADDRESS, or 127.0.0.1 without --public); the services and the local
             agent trust --tls-ca (also TERN_TLS_CERT_FILE, TERN_TLS_KEY_FILE, TERN_TLS_CA_FILE).
             Without them: plaintext.

The private NATS runs in operator mode: its operator, accounts and one user per service are
generated once under .tern/nats/ (secrets mode 600); nothing connects without a user.

Images: a private OCI registry (Debian's docker-registry) runs under .tern/registry/ unless
REGISTRY_URL names one (with REGISTRY_PUSH_USERNAME/PASSWORD for builders and
REGISTRY_PULL_USERNAME/PASSWORD for machines). The private one takes only tokens the gateway
signs (key in .tern/registry/token-key.pem, mode 600): each machine logs in with its own machine
token and may pull only the images placed on it; the operator's CLI context pushes with its token. The local agent builds
images (AGENT_BUILDER=true; AGENT_BUILDER=false to leave building to other machines).

Environment: NATS_URL (with TERN_NATS_AUTH_DIR when that NATS is in operator mode: the directory
\`node scripts/nats-auth.mjs init\` made for it), NATS_NAMESPACE, DATABASE_URL, DATABASE_SCHEMA and the other service
variables are passed through. TERN_HOME (state dir, default .tern), TERN_GATEWAY_PORT (default
1994 when free; 0 = any free port), TERN_UP_TIMEOUT_S (default 120), TERN_SKIP_INSTALL=1 (no apt,
no npm ci), TERN_SKIP_BUILD=1.`;

const env = process.env;
const GATEWAY_DEFAULT_PORT = 1994;
const BIND_HOST = env.HTTP_HOST || '127.0.0.1';

await main(async () => {
  const args = process.argv.slice(2);
  if (args.includes('--help') || args.includes('-h')) {
    console.log(HELP);
    return 0;
  }
  const f = files(stateDir());
  mkdirSync(f.logs, { recursive: true });

  const holder = runningSupervisor(f.lock);
  if (holder) return alreadyRunning(f, holder);
  // Checked before anything starts (and before --detach), so a bad address fails fast.
  const exposed = exposure({ args, env });
  if (args.includes('--detach'))
    return detach(
      f,
      args.filter((a) => a !== '--detach'),
    );

  const other = acquireLock(f.lock);
  if (other) return alreadyRunning(f, other);
  try {
    return await up(f, exposed);
  } finally {
    releaseLock(f.lock);
  }
});
// Idle keep-alive sockets must not hold the process open once everything is stopped.
process.exit(process.exitCode ?? 0);

function alreadyRunning(f, holder) {
  const run = readJson(f.run, {}) ?? {};
  console.log(
    `Tern is already running (supervisor pid ${holder.pid}${run.gatewayUrl ? `, gateway ${run.gatewayUrl}` : ''}).\n` +
      `Logs: ${shortPath(f.logs)}/   Stop it with: ${bold('npm run down')}`,
  );
  return 0;
}

async function up(f, exposed) {
  const t0 = Date.now();
  const external = { nats: Boolean(env.NATS_URL), postgres: Boolean(env.DATABASE_URL), registry: Boolean(env.REGISTRY_URL) };
  const run = { supervisor: { pid: process.pid }, startedAt: new Date().toISOString(), ready: false, services: {} };
  const record = () => writeJson(f.run, run);

  // A signal only records the request; the flow below notices at its next step, so starting
  // NATS or Postgres is never cut in half and whatever was started gets stopped.
  const it = { sup: undefined, nats: undefined, registry: undefined, pgDir: undefined, stopping: undefined, signalled: undefined };
  let wake;
  const stopRequested = new Promise((resolve) => (wake = resolve));
  const stopAll = (why, exitCode) => {
    it.stopping ??= (async () => {
      if (!it.sup && !it.nats && !it.registry && !it.pgDir) return exitCode; // nothing started yet
      console.log(`\n${cyan('›')} Stopping Tern (${why})`);
      if (it.sup) await it.sup.stopAll(10_000);
      if (it.nats) await stopNats(it.nats);
      if (it.registry) await stopRegistry(it.registry);
      if (it.pgDir) await stopPostgres(it.pgDir);
      rmSync(f.run, { force: true });
      ok('Stopped');
      return exitCode;
    })();
    return it.stopping;
  };
  const onSignal = (sig) => {
    if (it.signalled) {
      warn('second signal: killing everything now');
      it.sup?.killAll();
      if (it.nats) signal(it.nats.pid, 'SIGKILL');
      if (it.registry) signal(it.registry.pid, 'SIGKILL');
      return;
    }
    it.signalled = sig;
    wake(sig);
  };
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(sig, onSignal);

  try {
    const leftovers = await stopRecorded(f);
    if (leftovers.length) warn(`stopped leftovers of an earlier run that did not shut down: ${leftovers.join(', ')}`);

    if (env.TERN_SKIP_INSTALL !== '1') {
      await ensureSystemPackages({
        required: [...(external.nats ? [] : ['nats-server']), ...(external.postgres ? [] : ['postgresql'])],
        optional: ['runc', 'umoci', 'nftables', 'iproute2', 'docker-registry', 'apache2-utils', 'skopeo', 'debootstrap', 'zstd'],
      });
      await ensureNodeModules();
    }
    if (it.signalled) return stopAll(it.signalled, 0);
    if (env.TERN_SKIP_BUILD !== '1') await build();
    const missing = SERVICES.filter((s) => !existsSync(SERVICE_MAIN(s)));
    if (missing.length)
      throw new UserError(`not built: ${missing.map((s) => relative(REPO_ROOT, SERVICE_MAIN(s))).join(', ')} (npm run build)`);
    if (it.signalled) return stopAll(it.signalled, 0);

    const state = readJson(f.state, {}) ?? {};
    const creds = loadCredentials(f.credentials);
    const adminToken = env.BOOTSTRAP_ADMIN_TOKEN || creds.adminToken;
    const claimed = new Set();

    /** A private server up started: its exit reported while up runs, its entry in run.json, its port kept for the next run. */
    const keepPrivate = (name, label, server, port, advice) => {
      server.child.once('exit', (code, sig) => {
        if (!it.stopping) error(`private ${label} exited (${sig ?? code}); see ${f.logs}/${name}.log${advice}`);
      });
      run[name] = { pid: server.pid, start: server.start, port, url: server.url, private: true };
      updateJson(f.state, (s) => ({ ...s, [`${name}Port`]: port }));
      record();
    };

    let natsUrl = env.NATS_URL;
    if (!external.nats) {
      const port = await pickPort(state.natsPort, claimed);
      step(`Starting a private NATS (JetStream) on ${urlHost(exposed.bindHost)}:${port}`);
      it.nats = await startNats({
        dir: f.nats,
        port,
        logFile: `${f.logs}/nats.log`,
        host: exposed.bindHost,
        localHost: exposed.localHost,
        tls: exposed.tls,
      });
      natsUrl = it.nats.url;
      keepPrivate('nats', 'NATS', it.nats, port, '. Stop with Ctrl-C and run up again.');
      if (it.signalled) return stopAll(it.signalled, 0);
    }

    // Operator mode: each service its own NATS user (the private NATS always; an external one
    // when TERN_NATS_AUTH_DIR names its material from `node scripts/nats-auth.mjs init`).
    const authDir = external.nats ? env.TERN_NATS_AUTH_DIR : f.nats;
    const natsAuth = { creds: {}, signer: undefined };
    if (authDir) {
      natsAuth.creds = await writeCreds(authDir, env.NATS_NAMESPACE || 'tern', CONTROL_PLANE);
      natsAuth.signer = natsAuthFiles(authDir).signer;
    }

    let databaseUrl = env.DATABASE_URL;
    if (!external.postgres) {
      const port = await pickPort(state.postgresPort, claimed);
      const dir = await choosePgDir(f.dir, state.postgresDir);
      if (!dir.startsWith(f.dir)) warn(`the postgres user cannot use ${f.dir}; the private cluster lives in ${dir}`);
      if (!creds.postgresPassword) {
        creds.postgresPassword = newPassword();
        writeJson(f.credentials, creds, 0o600);
      }
      step(`Starting a private PostgreSQL on 127.0.0.1:${port} ${dim(`(${dir})`)}`);
      it.pgDir = dir;
      const pg = await startPostgres({ dir, port, database: 'tern', password: creds.postgresPassword, logLink: `${f.logs}/postgres.log` });
      databaseUrl = pg.url;
      run.postgres = { pid: pg.pid, port, dir, private: true };
      updateJson(f.state, (s) => ({ ...s, postgresPort: port, postgresDir: dir }));
      record();
      if (it.signalled) return stopAll(it.signalled, 0);
    }

    // The gateway's port is the one users type; the others only need to be free.
    const ports = { gateway: await chooseGatewayPort(state, claimed) };
    for (const svc of SERVICES.filter((s) => s !== 'gateway')) ports[svc] = await pickPort(state.ports?.[svc], claimed);
    updateJson(f.state, (s) => ({ ...s, ports }));
    const gatewayUrl = `${exposed.tls ? 'https' : 'http'}://${urlHost(exposed.localHost)}:${ports.gateway}`;
    run.gatewayUrl = gatewayUrl;
    const advertised = advertisedUrls(exposed, ports.gateway, run.nats);

    // Images: a private OCI registry unless REGISTRY_URL names one (REGISTRY_PUSH_* / REGISTRY_PULL_* its users).
    // The private one takes the gateway's tokens (its realm is the gateway's URL, hence started here).
    let registry = registryFromEnv();
    if (!external.registry) {
      if (!which('docker-registry')) warn('docker-registry is missing: no private image registry (deployments run the host image only)');
      else {
        const port = await pickPort(state.registryPort, claimed);
        step(`Starting a private OCI registry on ${urlHost(exposed.bindHost)}:${port}`);
        it.registry = await startRegistry({
          dir: f.registry,
          port,
          logFile: `${f.logs}/registry.log`,
          host: exposed.bindHost,
          localHost: exposed.localHost,
          tls: exposed.tls,
          token: { realm: `${advertised.gateway ?? gatewayUrl}${TOKEN_REALM_PATH}`, service: TOKEN_SERVICE, issuer: TOKEN_ISSUER },
        });
        const { url, host, insecure, keyFile } = it.registry;
        registry = { url, host, insecure, tokenKeyFile: keyFile };
        keepPrivate('registry', 'registry', it.registry, port, '');
      }
      if (it.signalled) return stopAll(it.signalled, 0);
    }

    const sup = new Supervisor({
      logsDir: f.logs,
      log: (msg) => console.log(`${dim(new Date().toISOString().slice(11, 19))} ${msg}`),
      onChange: () => {
        run.services = sup.snapshot();
        if (!it.stopping) record();
      },
    });
    it.sup = sup;
    for (const svc of SERVICES) {
      sup.add(svc, {
        env: serviceEnv(svc, {
          natsUrl,
          natsAuth,
          databaseUrl,
          adminToken,
          secretsKey: env.SECRETS_KEY || creds.secretsKey,
          gatewayUrl,
          agentDir: agentStateDir(f, external),
          exposed,
          advertised,
          registry,
        }),
        port: ports[svc],
        fixedPort: svc === 'gateway',
      });
    }
    step(`Starting ${SERVICES.join(', ')} ${dim(`(logs in ${shortPath(f.logs)}/)`)}`);
    sup.startAll();

    const result = await waitReady({
      gatewayUrl,
      caFile: exposed.tls?.caFile,
      timeoutMs: Number(env.TERN_UP_TIMEOUT_S || 120) * 1000,
      abort: () => it.signalled ?? (sup.failed().length ? `${sup.failed().join(', ')} exited for good` : undefined),
    });
    if (it.signalled) return stopAll(it.signalled, 0);
    if (!result.ok) {
      error(`Tern did not become ready: ${result.reason}`);
      reportDown(sup, [...new Set([...notUp(result.last), ...sup.failed().map((f) => f.split(' ')[0])])]);
      return stopAll('start-up failed', 1);
    }

    // The CLI's context first: `--detach` returns as soon as run.json says ready, and its caller
    // (a script, a test) uses the CLI next.
    const cliConfig = writeCliContext('local', {
      gateway: gatewayUrl,
      token: adminToken,
      // `tern image base` pushes as the builders' user, or with this context's (operator) token under token auth.
      ...(registry ? { registry: cliRegistry(registry) } : {}),
    });
    run.ready = true;
    run.readyAt = new Date().toISOString();
    record();
    const agents = result.last.body.agents.length;
    console.log(`
${green('✔')} ${bold('Tern is up')} ${dim(`in ${((Date.now() - t0) / 1000).toFixed(1)}s: 5 services, ${agents} agent${agents === 1 ? '' : 's'}`)}

  Gateway:        ${gatewayUrl}
  API docs:       ${gatewayUrl}/docs
  Operator token: ${adminToken} ${dim('(platform operator: pools, machines, workspaces)')}
  CLI config:     ${cliConfig} ${dim('(context "local")')}
  Logs:           ${f.logs}/
${registry ? `  Registry:       ${registry.url}${it.registry ? dim(' (private; the gateway signs its tokens)') : ''}\n` : ''}${reachability(exposed, advertised)}

Next: ${bold('npx tern status')}
${env.TERN_UP_DETACHED ? `Stop with ${bold('npm run down')}.` : `Stop with Ctrl-C, or ${bold('npm run down')} from another terminal.`}
`);
    // Supervise until a signal: the Supervisor restarts children that exit.
    return stopAll(await stopRequested, 0);
  } catch (e) {
    await stopAll(`error: ${e.message.split('\n')[0]}`, 1);
    throw e;
  }
}

/**
 * The local agent's state dir (config.yaml with its machine token, bundles). The machine token
 * is only good against the database that issued it, so each external database (URL, schema,
 * namespace) gets its own; the private one is always `agent/local`.
 */
function agentStateDir(f, external) {
  if (!external.postgres) return join(f.dir, 'agent', 'local');
  const key = [env.DATABASE_URL, env.DATABASE_SCHEMA ?? 'public', env.NATS_NAMESPACE ?? 'tern'].join('|');
  return join(f.dir, 'agent', createHash('sha256').update(key).digest('hex').slice(0, 12));
}

/** A path relative to the working directory when it lies inside it, else absolute. */
function shortPath(p) {
  const r = relative(process.cwd(), p);
  return r && !r.startsWith('..') ? r : p;
}

function reportDown(sup, names) {
  const snap = sup.snapshot();
  for (const svc of names) {
    const c = snap[svc];
    const facts = [`pid ${c.pid}`, c.status, `restarts ${c.restarts}`, ...(c.lastExit ? [`last exit ${c.lastExit}`] : [])];
    console.log(`\n${bold(svc)} is down ${dim(`(${facts.join(', ')})`)}; ${c.log}:`);
    console.log(tail(c.log, 20));
  }
}

async function chooseGatewayPort(state, claimed) {
  const asked = env.TERN_GATEWAY_PORT;
  if (asked !== undefined && asked !== '') {
    const p = Number(asked);
    if (!Number.isInteger(p) || p < 0 || p > 65535) throw new UserError(`TERN_GATEWAY_PORT=${asked}: not a port`);
    if (p > 0 && !(await isPortFree(p))) throw new UserError(`TERN_GATEWAY_PORT=${p} is in use`);
    return pickPort(p, claimed);
  }
  if (await isPortFree(GATEWAY_DEFAULT_PORT)) return pickPort(GATEWAY_DEFAULT_PORT, claimed);
  const port = await pickPort(state.ports?.gateway, claimed);
  warn(`port ${GATEWAY_DEFAULT_PORT} is taken; the gateway listens on ${port}`);
  return port;
}

/**
 * What machines elsewhere are told with --public: the gateway's URL (for the tern-agent init
 * line) and the private NATS's URL (in the registration answer). An external NATS keeps the
 * NATS_PUBLIC_URL the operator set.
 */
function advertisedUrls(exposed, gatewayPort, privateNats) {
  if (!exposed.address) return {};
  const host = urlHost(exposed.advertisedHost);
  return {
    gateway: `${exposed.tls ? 'https' : 'http'}://${host}:${gatewayPort}`,
    nats: privateNats ? `nats://${host}:${privateNats.port}` : env.NATS_PUBLIC_URL,
  };
}

/** The lines of the ready banner that say who can reach what, and in what form. */
function reachability(exposed, advertised) {
  const { tls } = exposed;
  const lines = [];
  if (!exposed.address) {
    lines.push(
      `  Network:        ${dim(`127.0.0.1 only, ${tls ? 'TLS' : 'plaintext'}: no other machine can reach the gateway or NATS (npm run up -- --public ADDRESS lets machines elsewhere join)`)}`,
    );
  } else {
    const bound = exposed.bindHost === '0.0.0.0' ? ' (listening on every interface)' : '';
    lines.push(
      `  Machines join:  gateway ${advertised.gateway}, NATS ${advertised.nats ?? yellow('NATS_PUBLIC_URL not set: agents are handed NATS_URL')}${dim(bound)}`,
    );
    if (!tls) {
      lines.push(
        `  ${yellow('!')} Plaintext over the network: tokens and traffic travel unencrypted; use this on a network you trust, or give --tls-cert and --tls-key (docs/operations.md: Machines on other networks)`,
      );
    }
  }
  if (tls) {
    lines.push(`  TLS:            the gateway serves HTTPS and NATS requires TLS (${tls.certFile})`);
    if (tls.caFile) {
      lines.push(`  Trust:          agents: tern-agent init … --ca ${tls.caFile}; the CLI: NODE_EXTRA_CA_CERTS=${tls.caFile} npx tern …`);
    }
  }
  return lines.join('\n');
}

/** The environment of one service: ours, plus only the variables that service reads. */
/** The registry in the CLI's context: the builders' user, or log in with the context's token (token auth). */
function cliRegistry(registry) {
  const where = { url: registry.url, insecure: registry.insecure };
  return registry.tokenKeyFile ? { ...where, tokenAuth: true } : { ...where, ...registry.push };
}

/**
 * REGISTRY_URL and its users from the environment, when the operator runs their own registry (or
 * its token key, REGISTRY_TOKEN_KEY_FILE, when that registry takes the gateway's tokens).
 */
function registryFromEnv() {
  if (!env.REGISTRY_URL) return undefined;
  const url = new URL(env.REGISTRY_URL);
  const user = (role) =>
    env[`REGISTRY_${role}_USERNAME`]
      ? { username: env[`REGISTRY_${role}_USERNAME`], password: env[`REGISTRY_${role}_PASSWORD`] ?? '' }
      : undefined;
  return {
    url: env.REGISTRY_URL,
    host: url.host,
    insecure: url.protocol === 'http:',
    push: user('PUSH'),
    pull: user('PULL'),
    ...(env.REGISTRY_TOKEN_KEY_FILE ? { tokenKeyFile: env.REGISTRY_TOKEN_KEY_FILE } : {}),
  };
}

function serviceEnv(svc, { natsUrl, natsAuth, databaseUrl, adminToken, secretsKey, gatewayUrl, agentDir, exposed, advertised, registry }) {
  const e = { ...env };
  for (const k of [
    'HTTP_PORT',
    'BOOTSTRAP_ADMIN_TOKEN',
    'DATABASE_URL',
    'DATABASE_SCHEMA',
    'DATABASE_RUN_MIGRATIONS',
    'POOL',
    'MACHINE_ID',
    'NATS_ACCOUNT_SIGNER',
    'TERN_NATS_AUTH_DIR',
    'SECRETS_KEY', // the gateway's alone
  ])
    delete e[k];
  for (const k of Object.keys(e)) if (k.startsWith('AGENT_') && svc !== 'agent') delete e[k];
  // Registry users go to the gateway only (machines get theirs at registration).
  for (const k of Object.keys(e)) if (k.startsWith('REGISTRY_')) delete e[k];
  Object.assign(e, { NATS_URL: natsUrl, HTTP_HOST: BIND_HOST });
  if (exposed.tls?.caFile) e.NATS_TLS_CA_FILE = exposed.tls.caFile;
  if (natsAuth.creds[svc]) e.NATS_CREDS = natsAuth.creds[svc];
  // The agent's NATS user comes from the gateway at registration, never a service's.
  if (svc === 'agent') delete e.NATS_CREDS;
  if (svc === 'gateway' && natsAuth.signer) e.NATS_ACCOUNT_SIGNER = natsAuth.signer;
  if (WITH_DATABASE.includes(svc)) {
    e.DATABASE_URL = databaseUrl;
    for (const k of ['DATABASE_SCHEMA', 'DATABASE_RUN_MIGRATIONS']) if (env[k]) e[k] = env[k];
  }
  if (svc === 'gateway') {
    e.BOOTSTRAP_ADMIN_TOKEN = adminToken;
    e.SECRETS_KEY = secretsKey;
    // The gateway signs the private registry's tokens; with static users, it hands the pull user
    // to every machine and the push user to builders at registration.
    if (registry) {
      e.REGISTRY_URL = registry.url;
      if (registry.tokenKeyFile) {
        e.REGISTRY_TOKEN_KEY_FILE = registry.tokenKeyFile;
        for (const k of ['REGISTRY_TOKEN_TTL_SECONDS', 'REGISTRY_BUILDER_POOLS']) if (env[k]) e[k] = env[k];
      }
      for (const [role, creds] of [
        ['PUSH', registry.push],
        ['PULL', registry.pull],
      ])
        if (creds) Object.assign(e, { [`REGISTRY_${role}_USERNAME`]: creds.username, [`REGISTRY_${role}_PASSWORD`]: creds.password });
    }
    if (exposed.tls) Object.assign(e, { TLS_CERT_FILE: exposed.tls.certFile, TLS_KEY_FILE: exposed.tls.keyFile });
    if (exposed.address) {
      // Only the gateway faces other machines; the other services' health and metrics stay on loopback.
      e.HTTP_HOST = exposed.bindHost;
      e.GATEWAY_PUBLIC_URL = advertised.gateway;
      if (advertised.nats) e.NATS_PUBLIC_URL = advertised.nats;
    }
  }
  if (svc === 'agent') {
    // The agent registers over HTTP and learns its NATS settings from the gateway's answer. The
    // operator token lets it register a new machine without a join token (after that, its own machine token).
    Object.assign(e, { AGENT_GATEWAY_URL: gatewayUrl, AGENT_TOKEN: adminToken, AGENT_STATE_DIR: agentDir, AGENT_DASHBOARD: 'off' });
    // The agent takes its NATS CA from its pinned one, not from NATS_TLS_CA_FILE.
    if (exposed.tls?.caFile) e.AGENT_CA_FILE = exposed.tls.caFile;
    e.POOL = env.POOL || 'default';
    if (env.MACHINE_ID) e.MACHINE_ID = env.MACHINE_ID;
    // A one-machine stack must build the images its deployments name: its agent is a builder unless told otherwise.
    e.AGENT_BUILDER = env.AGENT_BUILDER || 'true';
  }
  return e;
}
