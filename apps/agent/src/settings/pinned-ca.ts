import { readFileSync } from 'node:fs';
import { Agent, Pool, setGlobalDispatcher } from 'undici';

/**
 * With a pinned CA, the agent's HTTPS calls to its gateway trust that CA only; calls to other
 * hosts keep the system's roots. Installed as the process's global fetch dispatcher, so every
 * call (registration, network test, token rotation, the data plane) goes through it. The NATS
 * connection pins the same file (its `tls.caFile`).
 */
export function pinGatewayCa(gatewayUrl: string, caFile: string): void {
  const gateway = new URL(gatewayUrl).origin;
  const ca = readFileSync(caFile, 'utf8');
  setGlobalDispatcher(
    new Agent({
      factory: (origin, opts) => new Pool(origin, new URL(String(origin)).origin === gateway ? { ...opts, connect: { ca } } : opts),
    }),
  );
}
