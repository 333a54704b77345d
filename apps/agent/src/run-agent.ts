import { type INestApplication, Logger } from '@nestjs/common';
import { resolve } from 'node:path';
import { type Logger as Pino } from 'pino';
import { ConfigError, loadConfig, TERN_VERSION, type TernConfig } from '#tern/config';
import {
  JOIN_TOKEN_PREFIX,
  MACHINE_TOKEN_PREFIX,
  type MachineInventory,
  type MachineRegisterRequest,
  type MachineRegisterResponse,
} from '#tern/contracts';
import { connectNats } from '#tern/messaging';
import { inboxPrefix, jwtExpiresAt } from '#tern/nats-auth';
import { PinoLoggerService } from '#tern/observability';
import { bootstrap } from '#tern/service';
import { type AgentContext } from './agent-context.js';
import { AgentModule } from './agent.module.js';
import { TerminalDashboard } from './dashboard/terminal.js';
import { discoverInventory } from './discovery/inventory.js';
import { createAgentLogger } from './logging.js';
import { defaultMachineId } from './machine-id.js';
import { MachineNatsIdentity } from './registration/nats-identity.js';
import { pinGatewayCa } from './settings/pinned-ca.js';
import { REGISTER_BACKOFF, type RegisterOutcome, registerWithRetry } from './registration/register.js';
import { type AgentSettings, resolveSettings } from './settings/agent-settings.js';
import {
  AgentConfigError,
  type AgentConfigFile,
  defaultStateDir,
  readConfigFile,
  sha256,
  writeConfigFile,
} from './settings/config-file.js';
import { AgentState } from './state/agent-state.js';
import { backoffMs, fireAndForget } from '#tern/timing';

/** Exit statuses: sysexits' EX_NOPERM for a refused token, EX_CONFIG for a bad configuration. */
export const EXIT_REFUSED = 77;
export const EXIT_CONFIG = 78;

type SessionEnd = { kind: 'restart'; reason: string } | { kind: 'exit'; code: number; message: string };

/** Join and machine tokens name their machine; an operator API token does not, so the agent must. */
export function tokenNamesMachine(token: string): boolean {
  return token.startsWith(JOIN_TOKEN_PREFIX) || token.startsWith(MACHINE_TOKEN_PREFIX);
}

/** What to do about a refused token, by its kind. */
export function refusalAdvice(token: string): string {
  const fresh =
    'create a join token with `tern machine create --pool POOL` and run `tern-agent init --gateway URL --token TOKEN --pool POOL` again.';
  if (token.startsWith(MACHINE_TOKEN_PREFIX))
    return `This machine's token no longer works (the machine was removed, or the control plane lost it): ${fresh}`;
  if (token.startsWith(JOIN_TOKEN_PREFIX)) return `A join token works once and expires: ${fresh}`;
  return `Check the token, or ${fresh}`;
}

function natsKey(r: MachineRegisterResponse): string {
  return JSON.stringify([r.nats.servers, r.nats.namespace, r.nats.user, r.nats.pass, r.nats.token, r.heartbeatIntervalSeconds]);
}

function fail(message: string, code: number): never {
  process.stderr.write(`tern-agent: ${message}\n`);
  process.exit(code);
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * `tern-agent` / `tern-agent run`. The agent does not know its NATS servers until the gateway
 * tells it: it discovers the machine, registers over HTTP (retrying until the gateway answers),
 * keeps the machine token it is given, then boots the Nest app (libs/service bootstrap) with a
 * config whose NATS servers and namespace come from the answer. The app lives for one such
 * session; a re-registration that names other NATS settings closes it and boots a new one,
 * while the state, the logger and the dashboard carry on.
 */
export async function runAgent(options: { stateDir?: string } = {}): Promise<void> {
  const env = process.env;
  const stateDir = resolve(options.stateDir ?? defaultStateDir(env));
  let settings: AgentSettings;
  let base: TernConfig;
  try {
    settings = resolveSettings(readConfigFile(stateDir), env, stateDir);
    base = loadConfig('agent', env);
  } catch (e) {
    if (e instanceof AgentConfigError || e instanceof ConfigError) fail(e.message, EXIT_CONFIG);
    throw e;
  }

  // Before the first HTTPS call: from here on the gateway is trusted only through this CA.
  if (settings.ca) pinGatewayCa(settings.gatewayUrl, settings.ca);
  const state = new AgentState(settings.gatewayUrl, settings.pool);
  const tty = process.stdout.isTTY === true;
  const dashboardOn = settings.dashboard === 'on' ? tty : settings.dashboard === 'auto' && tty && process.stdin.isTTY === true;
  const logger: Pino = createAgentLogger({ level: base.log.level, format: base.log.format, dashboard: dashboardOn, stateDir, state });
  // Nest Logger calls made before an app exists (the NATS probe) go to the same place.
  Logger.overrideLogger(new PinoLoggerService(logger));
  process.on('unhandledRejection', (reason) => logger.error({ err: reason }, 'unhandled promise rejection'));

  let app: INestApplication | undefined;
  let dashboard: TerminalDashboard | undefined;
  let quitting = false;
  const quit = async (code: number, message?: string) => {
    if (quitting) return;
    quitting = true;
    state.setPhase(code === 0 ? 'stopping' : 'failed', message);
    aborter.abort();
    try {
      await app?.close();
    } finally {
      dashboard?.stop();
      if (message) process.stderr.write(`tern-agent: ${message}\n`);
      logger.flush?.();
      process.exit(code);
    }
  };
  const aborter = new AbortController();
  // Nest's own handlers take over while an app runs (enableShutdownHooks); these cover the rest.
  const onSignal = (signal: NodeJS.Signals) => {
    logger.info(`${signal} received: stopping`);
    fireAndForget('stopping', logger, quit(0));
  };
  const ownSignals = (on: boolean) => {
    for (const s of ['SIGINT', 'SIGTERM'] as const) {
      if (on) process.on(s, onSignal);
      else process.off(s, onSignal);
    }
  };
  ownSignals(true);
  if (dashboardOn) {
    dashboard = new TerminalDashboard(state, process.stdout, process.stdin, () => fireAndForget('stopping', logger, quit(0)));
    dashboard.start();
    logger.info(`dashboard on; logs go to ${stateDir}/agent.log`);
  }

  state.setPhase('starting', 'discovering hardware');
  let inventory: MachineInventory = await discoverInventory({
    onGpuError: (vendor, e) => logger.warn(`${vendor} GPU discovery failed: ${e.message}`),
  });
  state.gpus = inventory.gpus;
  logger.info(
    { cpu: inventory.cpu, memoryBytes: inventory.memoryBytes, gpus: inventory.gpus.length },
    `discovered ${inventory.cpu.model} (${inventory.cpu.threads} threads), ${Math.round(inventory.memoryBytes / 2 ** 30)} GiB memory, ${inventory.gpus.length} GPU(s)`,
  );

  /** A token rotated meanwhile (tern-agent rotate-token, or config set token) is in config.yaml: use it. */
  const adoptRotatedToken = () => {
    if (settings.tokenSource !== 'config.yaml') return;
    let token: string | undefined;
    try {
      token = readConfigFile(stateDir)?.token;
    } catch {
      token = undefined;
    }
    if (!token || token === settings.token) return;
    settings.token = token;
    logger.info(`the token in ${stateDir}/config.yaml changed (rotated); using it`);
  };

  const natsIdentity = new MachineNatsIdentity(stateDir);
  /** Set per NATS session: registers again (the NATS user is renewed by it). */
  let renew: ((why: string) => Promise<void>) | undefined;
  let renewTimer: NodeJS.Timeout | undefined;
  /** Renews the machine's NATS user at two thirds of its lifetime, over HTTPS with the machine token. */
  const scheduleRenewal = (jwt: string) => {
    clearTimeout(renewTimer);
    const expiresAt = jwtExpiresAt(jwt);
    if (!expiresAt) return;
    const inMs = Math.max(1000, ((expiresAt - Date.now()) * 2) / 3);
    renewTimer = setTimeout(() => {
      if (renew) fireAndForget('renewing the NATS user', logger, renew('renewing its NATS user before it expires'));
    }, inMs);
    renewTimer.unref();
  };

  /** Saves the machine token (replacing the join token) and the machine id in config.yaml, and the NATS user in nats.creds. */
  const keepCredentials = (answer: MachineRegisterResponse) => {
    if (answer.nats.jwt) {
      natsIdentity.keep(answer.nats.jwt);
      scheduleRenewal(answer.nats.jwt);
    }
    let file: AgentConfigFile | undefined;
    try {
      file = readConfigFile(stateDir);
    } catch {
      file = undefined;
    }
    const next: AgentConfigFile = { ...(file ?? { gateway: settings.gatewayUrl, token: settings.token, pool: settings.pool }) };
    const newToken = !!answer.machineToken && answer.machineToken !== settings.token;
    if (answer.machineToken && newToken) {
      next.replacedTokenSha256 = sha256(settings.token);
      next.token = answer.machineToken;
      settings.token = answer.machineToken;
      settings.tokenSource = 'config.yaml';
    }
    next.machineId = answer.machineId;
    settings.machineId = answer.machineId;
    if (JSON.stringify(next) === JSON.stringify(file)) return;
    try {
      const path = writeConfigFile(stateDir, next);
      logger.info(
        newToken ? `saved this machine's token in ${path} (the token it registered with is not needed again)` : `updated ${path}`,
      );
    } catch (e) {
      logger.warn(`could not save ${stateDir}/config.yaml (${(e as Error).message}); the machine token lives only in memory`);
    }
  };

  const register = async (inv: MachineInventory, why: string): Promise<Extract<RegisterOutcome, { kind: 'registered' }>> => {
    adoptRotatedToken();
    const machineId = settings.machineId ?? (tokenNamesMachine(settings.token) ? undefined : defaultMachineId());
    const request: MachineRegisterRequest = {
      pool: settings.pool,
      agentVersion: TERN_VERSION,
      inventory: inv,
      natsPublicKey: natsIdentity.publicKey,
      ...(machineId ? { machineId } : {}),
    };
    logger.info(
      `registering with ${settings.gatewayUrl} (${why}) as ${machineId ?? 'the machine the token names'} in pool ${settings.pool}, token from ${settings.tokenSource}`,
    );
    const outcome = await registerWithRetry(
      { gatewayUrl: settings.gatewayUrl, token: settings.token, request },
      {
        signal: aborter.signal,
        onAttempt: (n) => n > 1 && state.setPhase('registering', `attempt ${n}`),
        onRetry: (n, o, delay) => {
          const text = `registration attempt ${n} failed: ${o.message}; retrying in ${Math.round(delay / 1000)} s`;
          state.setPhase('registering', text);
          logger.warn(text);
        },
      },
    );
    if (outcome.kind === 'refused' && outcome.status === 401 && settings.fallbackToken) {
      logger.warn(`the gateway refused the machine token from config.yaml (${outcome.message}); registering with AGENT_TOKEN instead`);
      settings.token = settings.fallbackToken;
      settings.tokenSource = 'AGENT_TOKEN';
      delete settings.fallbackToken;
      return register(inv, why);
    }
    if (outcome.kind === 'refused') {
      logger.fatal({ status: outcome.status }, `the gateway refused this machine: ${outcome.message}`);
      const denied = outcome.status === 401 || outcome.status === 403;
      await quit(
        denied ? EXIT_REFUSED : 1,
        `the gateway refused this machine (${outcome.status}: ${outcome.message}).${denied ? ` ${refusalAdvice(settings.token)}` : ''}`,
      );
    }
    if (outcome.kind !== 'registered') {
      await quit(0);
      throw new Error('stopped');
    }
    keepCredentials(outcome.response);
    const r = outcome.response;
    state.machineId = r.machineId;
    state.pool = r.pool;
    logger.info(
      { machineId: r.machineId, pool: r.pool, nats: r.nats.servers, namespace: r.nats.namespace },
      `registered as ${r.machineId} in pool ${r.pool}; NATS ${r.nats.servers.join(',')} (namespace ${r.nats.namespace})`,
    );
    return outcome;
  };

  state.setPhase('registering');
  let answer = (await register(inventory, 'start-up')).response;
  for (let attempt = 1; ;) {
    const config: TernConfig = {
      ...base,
      machineId: answer.machineId,
      pool: answer.pool,
      nats: {
        servers: answer.nats.servers,
        namespace: answer.nats.namespace,
        // An agent declares nothing on NATS: the control plane's count applies.
        replicas: base.nats.replicas,
        user: answer.nats.user,
        pass: answer.nats.pass,
        token: answer.nats.token,
        ...(answer.nats.jwt ? { credsFile: natsIdentity.credsFile } : {}),
        ...(settings.ca ? { tls: { caFile: settings.ca } } : {}),
      },
    };

    // Reach NATS before booting: Nest exits the process when a provider fails at start-up.
    state.setPhase('connecting', answer.nats.servers.join(','));
    try {
      const probe = await connectNats({
        ...config.nats,
        name: `${answer.nats.namespace}-agent-probe`,
        inboxPrefix: inboxPrefix(answer.nats.namespace, 'agent', answer.machineId),
        firstConnectTimeoutMs: 30_000,
      });
      await probe.close();
    } catch (e) {
      const delay = backoffMs(attempt++, REGISTER_BACKOFF);
      logger.warn(`${(e as Error).message}; registering again in ${Math.round(delay / 1000)} s`);
      await sleep(delay);
      answer = (await register(inventory, 'NATS unreachable')).response;
      continue;
    }
    attempt = 1;

    let endSession!: (end: SessionEnd) => void;
    const ended = new Promise<SessionEnd>((r) => (endSession = r));
    const ctx: AgentContext = {
      state,
      settings,
      registration: answer,
      inventory,
      ...(answer.nats.jwt ? { natsCreds: (jwt: string) => natsIdentity.creds(jwt) } : {}),
      bootId: state.startedAt,
      reregister: async (reason, inv = inventory) => {
        const next = (await register(inv, reason)).response;
        if (state.phase === 'registering') state.setPhase('running');
        inventory = inv;
        ctx.inventory = inv;
        state.gpus = inv.gpus;
        if (natsKey(next) !== natsKey(answer)) {
          answer = next;
          endSession({ kind: 'restart', reason: 'the gateway named other NATS settings' });
        }
      },
    };
    renew = (why) => ctx.reregister(why);

    ownSignals(false);
    app = await bootstrap('agent', { config, logger, module: (c) => AgentModule.forRoot(c, ctx) });
    const end = await ended;
    if (quitting) return;
    logger.info(`restarting the NATS session: ${end.kind === 'restart' ? end.reason : end.message}`);
    ownSignals(true);
    const closing = app;
    app = undefined;
    ctx.keepContainers = end.kind === 'restart';
    await closing.close();
    if (end.kind === 'exit') return void (await quit(end.code, end.message));
  }
}
