import { type Logger as Pino } from 'pino';
import { type MachineRegisterResponse } from '#tern/contracts';
import { type AgentSettings } from '../settings/agent-settings.js';
import { type AgentConfigFile, readConfigFile, sha256, writeConfigFile } from '../settings/config-file.js';

/** config.yaml as it is now, or undefined when it is missing or unreadable. */
function currentFile(stateDir: string): AgentConfigFile | undefined {
  try {
    return readConfigFile(stateDir);
  } catch {
    return undefined;
  }
}

/** A token rotated meanwhile (tern-agent rotate-token, or config set token) is in config.yaml: use it. */
export function adoptRotatedToken(settings: AgentSettings, stateDir: string, logger: Pino): void {
  if (settings.tokenSource !== 'config.yaml') return;
  const token = currentFile(stateDir)?.token;
  if (!token || token === settings.token) return;
  settings.token = token;
  logger.info(`the token in ${stateDir}/config.yaml changed (rotated); using it`);
}

/**
 * Saves the machine token an answer carries (replacing the join token it registered with, whose
 * sha256 is remembered) and the machine id in config.yaml. A file that cannot be written leaves
 * the token in memory only.
 */
export function saveMachineToken(answer: MachineRegisterResponse, settings: AgentSettings, stateDir: string, logger: Pino): void {
  const file = currentFile(stateDir);
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
    logger.info(newToken ? `saved this machine's token in ${path} (the token it registered with is not needed again)` : `updated ${path}`);
  } catch (e) {
    logger.warn(`could not save ${stateDir}/config.yaml (${(e as Error).message}); the machine token lives only in memory`);
  }
}
