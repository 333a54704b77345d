import { type RotatedMachineToken } from '#tern/contracts';
import { type AgentConfigFile, readConfigFile, sha256, writeConfigFile } from '../settings/config-file.js';

export const ROTATE_TOKEN_PATH = '/api/v1/machine/rotate-token';

/**
 * Asks the gateway for a new machine token with the current one, then writes it to config.yaml
 * (atomically, mode 600) before returning. The old token stops working when the gateway
 * answers, so the new one is written before anything else; the old one's sha256 is recorded so
 * that an AGENT_TOKEN still naming it falls back to the file (as after a join).
 */
export async function rotateMachineToken(
  stateDir: string,
  config: AgentConfigFile,
  fetchImpl: typeof fetch = fetch,
): Promise<{ machineId: string; path: string }> {
  const url = `${config.gateway}${ROTATE_TOKEN_PATH}`;
  let response: Response;
  try {
    response = await fetchImpl(url, {
      method: 'POST',
      headers: { authorization: `Bearer ${config.token}` },
      signal: AbortSignal.timeout(15_000),
    });
  } catch (e) {
    const err = e as Error & { cause?: { code?: string; message?: string } };
    throw new Error(`cannot reach ${url}: ${err.cause?.code ?? err.cause?.message ?? err.message}`, { cause: e });
  }
  const body = (await response.json().catch(() => undefined)) as Partial<RotatedMachineToken> & { message?: unknown };
  if (!response.ok) {
    const message = Array.isArray(body?.message) ? body.message.join('; ') : String(body?.message ?? response.statusText);
    throw new Error(`the gateway refused to rotate the token (${response.status}: ${message})`);
  }
  if (typeof body?.machineToken !== 'string' || typeof body.machineId !== 'string') {
    throw new Error(`the gateway's answer to ${ROTATE_TOKEN_PATH} has no machine token`);
  }
  // Read again: a `config set` may have run meanwhile; only the token fields change.
  const current = readConfigFile(stateDir) ?? config;
  const path = writeConfigFile(stateDir, {
    ...current,
    token: body.machineToken,
    replacedTokenSha256: sha256(config.token),
    machineId: body.machineId,
  });
  return { machineId: body.machineId, path };
}
