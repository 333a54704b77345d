import { type AgentContainerSecrets, agentSecretsPath } from '#tern/contracts';
import { callGateway, type GatewayAccess, refusalOf } from '../gateway-data.js';

/** The gateway would not give a starting container its secrets: the start fails, saying why. */
export class ContainerSecretsError extends Error {}

/**
 * The secrets a starting container's spec names, fetched from the gateway with the machine token
 * (it answers only for a container placed on this machine and still starting). The values go into
 * the container's environment and nowhere else: not its labels, not a log line.
 */
export async function fetchContainerSecrets(access: GatewayAccess, containerId: string): Promise<Record<string, string>> {
  const response = await callGateway(access, agentSecretsPath(containerId), 30_000);
  if (!response.ok) throw new ContainerSecretsError(`the gateway did not give this container its secrets: ${await refusalOf(response)}`);
  return ((await response.json()) as AgentContainerSecrets).env;
}
