import { type INestApplication } from '@nestjs/common';
import { type Logger as Pino } from 'pino';
import { TERN_VERSION, type TernConfig } from '#tern/config';
import {
  JOIN_TOKEN_PREFIX,
  MACHINE_TOKEN_PREFIX,
  type MachineInventory,
  type MachineRegisterRequest,
  type MachineRegisterResponse,
} from '#tern/contracts';
import { connectNats } from '#tern/messaging';
import { inboxPrefix, jwtExpiresAt } from '#tern/nats-auth';
import { bootstrap } from '#tern/service';
import { backoffMs, fireAndForget, sleep } from '#tern/timing';
import { type AgentContext } from './agent-context.js';
import { AgentModule } from './agent.module.js';
import { TerminalDashboard } from './dashboard/terminal.js';
import { discoverInventory } from './discovery/inventory.js';
import { EXIT_REFUSED } from './exit-codes.js';
import { defaultMachineId } from './machine-id.js';
import { MachineNatsIdentity } from './registration/nats-identity.js';
import { REGISTER_BACKOFF, registerWithRetry } from './registration/register.js';
import { adoptRotatedToken, saveMachineToken } from './registration/saved-token.js';
import { type AgentSettings } from './settings/agent-settings.js';
import { type AgentState } from './state/agent-state.js';

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

/** The parts of an answer that a running NATS session depends on: when they change, the session is replaced. */
function natsKey(r: MachineRegisterResponse): string {
  return JSON.stringify([r.nats.servers, r.nats.namespace, r.nats.user, r.nats.pass, r.nats.token, r.heartbeatIntervalSeconds]);
}

/** What the runner is started with: the resolved settings and the process-wide parts that outlive every session. */
export interface RunnerParts {
  settings: AgentSettings;
  base: TernConfig;
  stateDir: string;
  state: AgentState;
  logger: Pino;
  dashboardOn: boolean;
}

/**
 * Runs the agent process: discovers the machine, registers over HTTP (retrying until the gateway
 * answers), then runs one Nest app per NATS *session* booted from the answer. A re-registration
 * that names other NATS settings ends the session and the next one starts from the new answer,
 * while the state, the logger and the dashboard carry on.
 */
export class AgentRunner {
  private readonly settings: AgentSettings;
  private readonly state: AgentState;
  private readonly logger: Pino;
  private readonly natsIdentity: MachineNatsIdentity;
  private readonly aborter = new AbortController();
  private app: INestApplication | undefined;
  private dashboard: TerminalDashboard | undefined;
  private quitting = false;
  private inventory!: MachineInventory;
  /** The latest registration answer; a session's re-registration replaces it. */
  private answer!: MachineRegisterResponse;
  /** Set per NATS session: registers again (the NATS user is renewed by it). */
  private renew: ((why: string) => Promise<void>) | undefined;
  private renewTimer: NodeJS.Timeout | undefined;

  constructor(private readonly parts: RunnerParts) {
    this.settings = parts.settings;
    this.state = parts.state;
    this.logger = parts.logger;
    this.natsIdentity = new MachineNatsIdentity(parts.stateDir);
  }

  async run(): Promise<void> {
    this.ownSignals(true);
    if (this.parts.dashboardOn) this.startDashboard();
    await this.discover();
    this.state.setPhase('registering');
    this.answer = await this.register(this.inventory, 'start-up');
    for (;;) {
      const config = await this.reachNats();
      const restart = await this.runSession(config);
      if (this.quitting) return;
      await this.closeSession(restart);
    }
  }

  /** Ends the process: closes the running session (its containers stop), then exits with `code`. */
  private async quit(code: number, message?: string): Promise<void> {
    if (this.quitting) return;
    this.quitting = true;
    this.state.setPhase(code === 0 ? 'stopping' : 'failed', message);
    this.aborter.abort();
    try {
      await this.app?.close();
    } finally {
      this.dashboard?.stop();
      if (message) process.stderr.write(`tern-agent: ${message}\n`);
      this.logger.flush?.();
      process.exit(code);
    }
  }

  private readonly onSignal = (signal: NodeJS.Signals) => {
    this.logger.info(`${signal} received: stopping`);
    fireAndForget('stopping', this.logger, this.quit(0));
  };

  /** Nest's own handlers take over while an app runs (enableShutdownHooks); these cover the rest. */
  private ownSignals(on: boolean): void {
    for (const s of ['SIGINT', 'SIGTERM'] as const) {
      if (on) process.on(s, this.onSignal);
      else process.off(s, this.onSignal);
    }
  }

  private startDashboard(): void {
    this.dashboard = new TerminalDashboard(this.state, process.stdout, process.stdin, () =>
      fireAndForget('stopping', this.logger, this.quit(0)),
    );
    this.dashboard.start();
    this.logger.info(`dashboard on; logs go to ${this.parts.stateDir}/agent.log`);
  }

  private async discover(): Promise<void> {
    this.state.setPhase('starting', 'discovering hardware');
    const inventory = await discoverInventory({
      onGpuError: (vendor, e) => this.logger.warn(`${vendor} GPU discovery failed: ${e.message}`),
    });
    this.inventory = inventory;
    this.state.gpus = inventory.gpus;
    this.logger.info(
      { cpu: inventory.cpu, memoryBytes: inventory.memoryBytes, gpus: inventory.gpus.length },
      `discovered ${inventory.cpu.model} (${inventory.cpu.threads} threads), ${Math.round(inventory.memoryBytes / 2 ** 30)} GiB memory, ${inventory.gpus.length} GPU(s)`,
    );
  }

  /**
   * Registers over HTTPS until the gateway answers. A refusal ends the process (a refused machine
   * token first falls back to AGENT_TOKEN once); so does a stop while it retries.
   */
  private async register(inv: MachineInventory, why: string): Promise<MachineRegisterResponse> {
    const { settings, logger, state } = this;
    adoptRotatedToken(settings, this.parts.stateDir, logger);
    const machineId = settings.machineId ?? (tokenNamesMachine(settings.token) ? undefined : defaultMachineId());
    const request: MachineRegisterRequest = {
      pool: settings.pool,
      agentVersion: TERN_VERSION,
      inventory: inv,
      natsPublicKey: this.natsIdentity.publicKey,
      ...(machineId ? { machineId } : {}),
    };
    logger.info(
      `registering with ${settings.gatewayUrl} (${why}) as ${machineId ?? 'the machine the token names'} in pool ${settings.pool}, token from ${settings.tokenSource}`,
    );
    const outcome = await registerWithRetry(
      { gatewayUrl: settings.gatewayUrl, token: settings.token, request },
      {
        signal: this.aborter.signal,
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
      return this.register(inv, why);
    }
    if (outcome.kind === 'refused') {
      logger.fatal({ status: outcome.status }, `the gateway refused this machine: ${outcome.message}`);
      const denied = outcome.status === 401 || outcome.status === 403;
      await this.quit(
        denied ? EXIT_REFUSED : 1,
        `the gateway refused this machine (${outcome.status}: ${outcome.message}).${denied ? ` ${refusalAdvice(settings.token)}` : ''}`,
      );
    }
    if (outcome.kind !== 'registered') {
      await this.quit(0);
      throw new Error('stopped');
    }
    const r = outcome.response;
    this.keepCredentials(r);
    state.machineId = r.machineId;
    state.pool = r.pool;
    logger.info(
      { machineId: r.machineId, pool: r.pool, nats: r.nats.servers, namespace: r.nats.namespace },
      `registered as ${r.machineId} in pool ${r.pool}; NATS ${r.nats.servers.join(',')} (namespace ${r.nats.namespace})`,
    );
    return r;
  }

  /** Keeps the NATS user in nats.creds (renewed before it expires) and the machine token and id in config.yaml. */
  private keepCredentials(answer: MachineRegisterResponse): void {
    if (answer.nats.jwt) {
      this.natsIdentity.keep(answer.nats.jwt);
      this.scheduleRenewal(answer.nats.jwt);
    }
    saveMachineToken(answer, this.settings, this.parts.stateDir, this.logger);
  }

  /** Renews the machine's NATS user at two thirds of its lifetime, over HTTPS with the machine token. */
  private scheduleRenewal(jwt: string): void {
    clearTimeout(this.renewTimer);
    const expiresAt = jwtExpiresAt(jwt);
    if (!expiresAt) return;
    const inMs = Math.max(1000, ((expiresAt - Date.now()) * 2) / 3);
    this.renewTimer = setTimeout(() => {
      if (this.renew) fireAndForget('renewing the NATS user', this.logger, this.renew('renewing its NATS user before it expires'));
    }, inMs);
    this.renewTimer.unref();
  }

  /** The service config of a session: the base config with NATS, machine and pool from the answer. */
  private sessionConfig(answer: MachineRegisterResponse): TernConfig {
    const { base } = this.parts;
    return {
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
        ...(answer.nats.jwt ? { credsFile: this.natsIdentity.credsFile } : {}),
        ...(this.settings.ca ? { tls: { caFile: this.settings.ca } } : {}),
      },
    };
  }

  /**
   * Reaches NATS before booting, since Nest exits the process when a provider fails at start-up:
   * while the answer's servers cannot be reached, registers again after a back-off.
   */
  private async reachNats(): Promise<TernConfig> {
    for (let attempt = 1; ; attempt++) {
      const answer = this.answer;
      const config = this.sessionConfig(answer);
      this.state.setPhase('connecting', answer.nats.servers.join(','));
      try {
        const probe = await connectNats({
          ...config.nats,
          name: `${answer.nats.namespace}-agent-probe`,
          inboxPrefix: inboxPrefix(answer.nats.namespace, 'agent', answer.machineId),
          firstConnectTimeoutMs: 30_000,
        });
        await probe.close();
        return config;
      } catch (e) {
        const delay = backoffMs(attempt, REGISTER_BACKOFF);
        this.logger.warn(`${(e as Error).message}; registering again in ${Math.round(delay / 1000)} s`);
        await sleep(delay);
        this.answer = await this.register(this.inventory, 'NATS unreachable');
      }
    }
  }

  /** Boots the Nest app of one session; resolves with why it must be replaced (a re-registration named other NATS settings). */
  private async runSession(config: TernConfig): Promise<{ reason: string; ctx: AgentContext }> {
    const { state, natsIdentity } = this;
    const answer = this.answer;
    let restart!: (reason: string) => void;
    const ended = new Promise<string>((r) => (restart = r));
    const ctx: AgentContext = {
      state,
      settings: this.settings,
      registration: answer,
      inventory: this.inventory,
      ...(answer.nats.jwt ? { natsCreds: (jwt: string) => natsIdentity.creds(jwt) } : {}),
      bootId: state.startedAt,
      reregister: async (reason, inv = this.inventory) => {
        const next = await this.register(inv, reason);
        if (state.phase === 'registering') state.setPhase('running');
        this.inventory = inv;
        ctx.inventory = inv;
        state.gpus = inv.gpus;
        if (natsKey(next) !== natsKey(this.answer)) {
          this.answer = next;
          restart('the gateway named other NATS settings');
        }
      },
    };
    this.renew = (why) => ctx.reregister(why);
    this.ownSignals(false);
    this.app = await bootstrap('agent', { config, logger: this.logger, module: (c) => AgentModule.forRoot(c, ctx) });
    return { reason: await ended, ctx };
  }

  /** Closes a session that is being replaced; its containers keep running for the next one to adopt. */
  private async closeSession(end: { reason: string; ctx: AgentContext }): Promise<void> {
    this.logger.info(`restarting the NATS session: ${end.reason}`);
    this.ownSignals(true);
    const closing = this.app;
    this.app = undefined;
    end.ctx.keepContainers = true;
    await closing?.close();
  }
}
