import { agentResultPath, taskResultName } from '#tern/contracts';
import { sleep } from '#tern/timing';
import { callGateway, type GatewayAccess, refusalOf } from '../gateway-data.js';

/**
 * Stores a task's large result with the gateway, which takes it only from the machine holding the
 * attempt's lease: the lease is recorded when the gateway has read task.started, so a 403 is
 * retried for a while (the start may still be on its way). A 409 means this attempt's result is
 * stored already (an earlier try of ours whose answer was lost): only the lease holder can write it.
 */
export async function putResult({ gatewayUrl, token }: GatewayAccess, taskId: string, attempt: number, json: Uint8Array): Promise<string> {
  const path = agentResultPath(taskId, attempt);
  for (let tryNo = 0; ; tryNo++) {
    const response = await callGateway({ gatewayUrl, token }, path, 120_000, fetch, json);
    if (response.ok) return ((await response.json()) as { resultRef: string }).resultRef;
    if (response.status === 409) return taskResultName(taskId, attempt);
    if (response.status !== 403 || tryNo >= 20)
      throw new Error(`storing the result of ${taskId} attempt ${attempt}: the gateway answered ${await refusalOf(response)}`);
    await sleep(500);
  }
}
