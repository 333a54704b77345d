import { Logger } from '@nestjs/common';
import { readFileSync } from 'node:fs';
import { connect, credsAuthenticator, type NatsConnection } from '@nats-io/transport-node';
import { backoffMs, fireAndForget, sleep } from '#tern/timing';
import { Counter } from 'prom-client';

/** Between tries of the first connection: 250 ms, doubling, at most 5 s. */
const FIRST_CONNECT_BACKOFF = { firstMs: 250, maxMs: 5000 };

export interface ConnectOptions {
  servers: string[];
  name: string;
  user?: string;
  pass?: string;
  token?: string;
  /**
   * A `.creds` file (user JWT and nkey seed) for NATS operator mode; read again at every
   * (re)connection, so a renewed JWT written in its place is picked up.
   */
  credsFile?: string;
  /** The `.creds` text itself, asked for again at every (re)connection (credentials kept in memory). */
  credentials?: () => Uint8Array;
  /** Where replies and JetStream deliveries come back; a user's permissions allow only its own. */
  inboxPrefix?: string;
  /** TLS required, the server verified against caFile (and a client certificate where the server asks for one). */
  tls?: { caFile?: string; certFile?: string; keyFile?: string };
  /** Give up on the first connection after this long; reconnects after that never give up. */
  firstConnectTimeoutMs?: number;
}

/**
 * Connects with unlimited reconnects (jittered back-off) so a NATS restart never kills a
 * service; the first connection is retried too, until firstConnectTimeoutMs.
 */
export async function connectNats(opts: ConnectOptions, logger = new Logger('nats')): Promise<NatsConnection> {
  const deadline = Date.now() + (opts.firstConnectTimeoutMs ?? 60_000);
  for (let failures = 1; ; failures++) {
    try {
      const nc = await connect({
        servers: opts.servers,
        name: opts.name,
        user: opts.user,
        pass: opts.pass,
        token: opts.token,
        ...(opts.credsFile || opts.credentials
          ? { authenticator: credsAuthenticator(opts.credentials ?? readCreds(opts.credsFile!)) }
          : {}),
        ...(opts.inboxPrefix ? { inboxPrefix: opts.inboxPrefix } : {}),
        ...(opts.tls ? { tls: opts.tls } : {}),
        maxReconnectAttempts: -1,
        reconnectTimeWait: 1000,
        reconnectJitter: 500,
        pingInterval: 5000,
        maxPingOut: 2,
        // Every request and JetStream publish would otherwise build an Error up front (a stack
        // capture) to enrich a timeout that rarely comes: about 3% of the gateway's and the
        // agent's CPU under bench/tasks. A timeout still says what timed out.
        noAsyncTraces: true,
      });
      fireAndForget('watching the NATS connection status', logger, watchStatus(nc, logger));
      logger.log(`connected to ${nc.getServer()} as ${opts.name}`);
      return nc;
    } catch (e) {
      const delay = backoffMs(failures, FIRST_CONNECT_BACKOFF);
      if (Date.now() + delay > deadline)
        throw new Error(`cannot reach NATS at ${opts.servers.join(',')}: ${(e as Error).message}`, { cause: e });
      logger.warn(`NATS not reachable at ${opts.servers.join(',')} (${(e as Error).message}); retrying in ${delay} ms`);
      await sleep(delay);
    }
  }
}

function readCreds(path: string): () => Uint8Array {
  return () => {
    try {
      return readFileSync(path);
    } catch (e) {
      throw new Error(`cannot read the NATS credentials ${path}: ${(e as Error).message}`, { cause: e });
    }
  };
}

const connectionEvents = new Counter({
  name: 'tern_nats_connection_events_total',
  help: 'NATS connection changes: disconnect, reconnect (a NATS server restart or a network cut shows here)',
  labelNames: ['event'],
});
// Both at 0 from the start, so increase() sees a series before the first disconnect.
for (const event of ['disconnect', 'reconnect']) connectionEvents.inc({ event }, 0);

async function watchStatus(nc: NatsConnection, logger: Logger) {
  for await (const s of nc.status()) {
    if (s.type === 'disconnect' || s.type === 'reconnect') connectionEvents.inc({ event: s.type });
    if (s.type === 'disconnect') logger.warn(`disconnected from NATS ${'server' in s ? s.server : ''}`);
    else if (s.type === 'reconnect') logger.log(`reconnected to NATS ${'server' in s ? s.server : ''}`);
    else if (s.type === 'error') logger.error(`NATS error: ${'error' in s ? String(s.error) : ''}`);
  }
}
