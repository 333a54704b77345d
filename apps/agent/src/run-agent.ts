import { Logger } from '@nestjs/common';
import { resolve } from 'node:path';
import { ConfigError, loadConfig, type TernConfig } from '#tern/config';
import { PinoLoggerService } from '#tern/observability';
import { EXIT_CONFIG } from './exit-codes.js';
import { createAgentLogger } from './logging.js';
import { pinGatewayCa } from './settings/pinned-ca.js';
import { type AgentSettings, resolveSettings } from './settings/agent-settings.js';
import { AgentConfigError, defaultStateDir, readConfigFile } from './settings/config-file.js';
import { AgentState } from './state/agent-state.js';

function fail(message: string, code: number): never {
  process.stderr.write(`tern-agent: ${message}\n`);
  process.exit(code);
}

/**
 * `tern-agent` / `tern-agent run`. The agent does not know its NATS servers until the gateway
 * tells it: it discovers the machine, registers over HTTP (retrying until the gateway answers),
 * keeps the machine token it is given, then boots the Nest app (libs/service bootstrap) with a
 * config whose NATS servers and namespace come from the answer. The app lives for one such
 * session; a re-registration that names other NATS settings closes it and boots a new one,
 * while the state, the logger and the dashboard carry on (AgentRunner).
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
  const logger = createAgentLogger({ level: base.log.level, format: base.log.format, dashboard: dashboardOn, stateDir, state });
  // Nest Logger calls made before an app exists (the NATS probe) go to the same place.
  Logger.overrideLogger(new PinoLoggerService(logger));
  process.on('unhandledRejection', (reason) => logger.error({ err: reason }, 'unhandled promise rejection'));

  // Loaded only once the settings hold: a bad configuration is reported without loading the whole agent.
  const { AgentRunner } = await import('./agent-runner.js');
  await new AgentRunner({ settings, base, stateDir, state, logger, dashboardOn }).run();
}
