/** Where the gateway is and the machine token that authenticates this machine to it. */
export interface GatewayAccess {
  readonly gatewayUrl: string;
  readonly token: string;
}

/**
 * One call of the agent's data plane on the gateway (code bundles, large request bodies, large task results), with
 * the machine token; the pinned CA applies through the global fetch dispatcher. Throws when the
 * gateway cannot be reached; any answer, refusals included, is returned.
 */
export async function callGateway(
  access: GatewayAccess,
  path: string,
  timeoutMs: number,
  fetchImpl: typeof fetch = fetch,
  put?: Uint8Array,
): Promise<Response> {
  const url = `${access.gatewayUrl.replace(/\/+$/, '')}${path}`;
  try {
    return await fetchImpl(url, {
      method: put ? 'PUT' : 'GET',
      headers: { authorization: `Bearer ${access.token}`, ...(put ? { 'content-type': 'application/octet-stream' } : {}) },
      body: put,
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (e) {
    const err = e as Error & { cause?: { code?: string; message?: string } };
    throw new Error(`cannot reach ${url}: ${err.cause?.code ?? err.cause?.message ?? err.message}`, { cause: e });
  }
}

/** "<status> (<the gateway's message>)" of a refused call. */
export async function refusalOf(response: Response): Promise<string> {
  const body = (await response.json().catch(() => undefined)) as { message?: unknown } | undefined;
  return `${response.status} (${String(body?.message ?? response.statusText)})`;
}
