import { type Logger } from '@nestjs/common';
import { type Consumer, jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { AgentTaskPermit, agentTaskPermitPath, STREAMS, TASK_PERMIT, taskConsumerName } from '#tern/contracts';
import { type ConnectOptions, connectNats, type Messaging, validatePayload } from '#tern/messaging';
import { fireAndForget } from '#tern/timing';
import { callGateway, type GatewayAccess, refusalOf } from '../gateway-data.js';

/** A failed renewal is tried again this much later (the permit's JWT lives on meanwhile). */
const RENEW_RETRY_MS = 10_000;

export interface TaskPermitsOptions {
  /** The agent's own NATS connection settings (servers, TLS, inbox); each permit connects with them and its own user. */
  connect: Omit<ConnectOptions, 'name' | 'credsFile' | 'credentials'>;
  machineId: string;
  gateway: () => GatewayAccess;
  /** `.creds` text for a JWT issued for this machine's key; undefined: no NATS user of its own, pull on `messaging`. */
  creds?: (jwt: string) => string;
  messaging: Messaging;
  logger: Logger;
}

interface Permit {
  readonly deploymentId: string;
  readonly version: number;
  /** Containers of the version being served here. */
  users: number;
  creds?: Uint8Array;
  connection?: Promise<NatsConnection>;
  renewal?: NodeJS.Timeout;
}

/**
 * Task permits: the machine's own NATS user may not pull tasks; for each task-queue version it
 * serves, the agent asks the gateway (HTTPS, machine token) for a permit, a user JWT for the same
 * key that may pull and ack only that version's consumer, and opens a connection with it. The
 * JWT is renewed at two thirds of its life (the connection presents the new one at its next
 * reconnection, at the latest when the server ends the old one at expiry); the connection is
 * closed when the last container of the version is no longer served.
 */
export class TaskPermits {
  private readonly permits = new Map<string, Permit>();

  constructor(private readonly opts: TaskPermitsOptions) {}

  /** One more container of the version pulls through its permit. */
  retain(deploymentId: string, version: number): void {
    const key = taskConsumerName(deploymentId, version);
    const permit = this.permits.get(key) ?? { deploymentId, version, users: 0 };
    permit.users++;
    this.permits.set(key, permit);
  }

  /** A container of the version stopped pulling: the last one closes the permit. */
  release(deploymentId: string, version: number): void {
    const key = taskConsumerName(deploymentId, version);
    const permit = this.permits.get(key);
    if (!permit || --permit.users > 0) return;
    this.permits.delete(key);
    this.close(permit);
  }

  closeAll(): void {
    for (const permit of this.permits.values()) this.close(permit);
    this.permits.clear();
  }

  /** The version's durable consumer, on its permit (connected on first use, and again after the connection closed). */
  async consumer(deploymentId: string, version: number): Promise<Consumer> {
    const durable = taskConsumerName(deploymentId, version);
    const stream = this.opts.messaging.ns.stream(STREAMS[TASK_PERMIT.stream!].name);
    if (!this.opts.creds) return this.opts.messaging.js.consumers.get(stream, durable);
    const permit = this.permits.get(durable);
    if (!permit) throw new Error(`no task permit is open for ${deploymentId} v${version}`);
    const current = permit.connection;
    let nc = current ? await current.catch(() => undefined) : undefined;
    if (!nc || nc.isClosed()) {
      // Several pull loops share the permit: the first to find it down connects it again.
      if (permit.connection === current) permit.connection = this.connect(permit, durable);
      nc = await permit.connection!;
    }
    return jetstream(nc).consumers.get(stream, durable);
  }

  private async connect(permit: Permit, durable: string): Promise<NatsConnection> {
    await this.renew(permit);
    return connectNats(
      {
        ...this.opts.connect,
        name: `${this.opts.messaging.ns.name}-machine-${this.opts.machineId}-${durable}`,
        credentials: () => permit.creds!,
        firstConnectTimeoutMs: 30_000,
      },
      this.opts.logger,
    );
  }

  /** Fetches a new permit JWT and schedules the next renewal. Throws when the gateway refuses or cannot be reached. */
  private async renew(permit: Permit): Promise<void> {
    clearTimeout(permit.renewal);
    const response = await callGateway(this.opts.gateway(), agentTaskPermitPath(permit.deploymentId, permit.version), 30_000);
    if (!response.ok)
      throw new Error(`the gateway refused a task permit for ${permit.deploymentId} v${permit.version}: ${await refusalOf(response)}`);
    const answer = await validatePayload(AgentTaskPermit, await response.json());
    if (!answer.ok) throw new Error(`the gateway's task permit answer is invalid (${answer.reason})`);
    permit.creds = new TextEncoder().encode(this.opts.creds!(answer.value.jwt));
    const lifetime = Date.parse(answer.value.expiresAt) - Date.now();
    this.schedule(permit, Math.max(1000, (lifetime * 2) / 3));
  }

  private schedule(permit: Permit, inMs: number) {
    permit.renewal = setTimeout(() => {
      if (!this.permits.has(taskConsumerName(permit.deploymentId, permit.version))) return;
      const renewed = this.renew(permit).catch((e: Error) => {
        this.opts.logger.warn(`renewing the task permit of ${permit.deploymentId} v${permit.version}: ${e.message}; again in 10 s`);
        this.schedule(permit, RENEW_RETRY_MS);
      });
      fireAndForget('renewing a task permit', this.opts.logger, renewed);
    }, inMs);
    permit.renewal.unref();
  }

  private close(permit: Permit) {
    clearTimeout(permit.renewal);
    const closing = permit.connection?.then((nc) => nc.close()).catch(() => undefined);
    if (closing) fireAndForget('closing a task permit', this.opts.logger, closing);
  }
}
