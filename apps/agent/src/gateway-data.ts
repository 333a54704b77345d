/** Where the gateway is and the machine token that authenticates this machine to it. */
export interface GatewayAccess {
  readonly gatewayUrl: string;
  readonly token: string;
}

/**
 * One call of the agent's data plane on the gateway (code bundles, large request bodies, large task results, volumes), with
 * the machine token; the pinned CA applies through the global fetch dispatcher. Throws when the
 * gateway cannot be reached; any answer, refusals included, is returned.
 */
export async function callGateway(
  access: GatewayAccess,
  path: string,
  timeoutMs: number,
  fetchImpl: typeof fetch = fetch,
  /** Bytes to PUT, or a JSON value to POST; a GET without. */
  send?: Uint8Array | { json: unknown },
): Promise<Response> {
  const url = `${access.gatewayUrl.replace(/\/+$/, '')}${path}`;
  const json = send && 'json' in send;
  try {
    return await fetchImpl(url, {
      method: json ? 'POST' : send ? 'PUT' : 'GET',
      headers: {
        authorization: `Bearer ${access.token}`,
        ...(send ? { 'content-type': json ? 'application/json' : 'application/octet-stream' } : {}),
      },
      body: json ? JSON.stringify(send.json) : send,
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
