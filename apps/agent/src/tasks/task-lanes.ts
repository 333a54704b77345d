import { type Logger } from '@nestjs/common';
import { type Consumer, jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { AgentTaskLane, agentTaskLanePath, STREAMS, TASK_LANE, taskConsumerName } from '#tern/contracts';
import { type ConnectOptions, connectNats, type Messaging, validatePayload } from '#tern/messaging';
import { fireAndForget } from '#tern/timing';
import { callGateway, type GatewayAccess, refusalOf } from '../gateway-data.js';

/** A failed renewal is tried again this much later (the lane's JWT lives on meanwhile). */
const RENEW_RETRY_MS = 10_000;

export interface TaskLanesOptions {
  /** The agent's own NATS connection settings (servers, TLS, inbox); each lane connects with them and its own user. */
  connect: Omit<ConnectOptions, 'name' | 'credsFile' | 'credentials'>;
  machineId: string;
  gateway: () => GatewayAccess;
  /** `.creds` text for a JWT issued for this machine's key; undefined: no NATS user of its own, pull on `messaging`. */
  creds?: (jwt: string) => string;
  messaging: Messaging;
  logger: Logger;
}

interface Lane {
  readonly deploymentId: string;
  readonly version: number;
  /** Containers of the version being served here. */
  users: number;
  creds?: Uint8Array;
  connection?: Promise<NatsConnection>;
  renewal?: NodeJS.Timeout;
}

/**
 * Task lanes: the machine's own NATS user may not pull tasks; for each task-queue version it
 * serves, the agent asks the gateway (HTTPS, machine token) for a lane, a user JWT for the same
 * key that may pull and ack only that version's consumer, and opens a connection with it. The
 * JWT is renewed at two thirds of its life (the connection presents the new one at its next
 * reconnection, at the latest when the server ends the old one at expiry); the connection is
 * closed when the last container of the version is no longer served.
 */
export class TaskLanes {
  private readonly lanes = new Map<string, Lane>();

  constructor(private readonly opts: TaskLanesOptions) {}

  /** One more container of the version pulls through its lane. */
  retain(deploymentId: string, version: number): void {
    const key = taskConsumerName(deploymentId, version);
    const lane = this.lanes.get(key) ?? { deploymentId, version, users: 0 };
    lane.users++;
    this.lanes.set(key, lane);
  }

  /** A container of the version stopped pulling: the last one closes the lane. */
  release(deploymentId: string, version: number): void {
    const key = taskConsumerName(deploymentId, version);
    const lane = this.lanes.get(key);
    if (!lane || --lane.users > 0) return;
    this.lanes.delete(key);
    this.close(lane);
  }

  closeAll(): void {
    for (const lane of this.lanes.values()) this.close(lane);
    this.lanes.clear();
  }

  /** The version's durable consumer, on its lane (connected on first use, and again after the connection closed). */
  async consumer(deploymentId: string, version: number): Promise<Consumer> {
    const durable = taskConsumerName(deploymentId, version);
    const stream = this.opts.messaging.ns.stream(STREAMS[TASK_LANE.stream!].name);
    if (!this.opts.creds) return this.opts.messaging.js.consumers.get(stream, durable);
    const lane = this.lanes.get(durable);
    if (!lane) throw new Error(`no task lane is open for ${deploymentId} v${version}`);
    const current = lane.connection;
    let nc = current ? await current.catch(() => undefined) : undefined;
    if (!nc || nc.isClosed()) {
      // Several pull loops share the lane: the first to find it down connects it again.
      if (lane.connection === current) lane.connection = this.connect(lane, durable);
      nc = await lane.connection!;
    }
    return jetstream(nc).consumers.get(stream, durable);
  }

  private async connect(lane: Lane, durable: string): Promise<NatsConnection> {
    await this.renew(lane);
    return connectNats(
      {
        ...this.opts.connect,
        name: `${this.opts.messaging.ns.name}-machine-${this.opts.machineId}-${durable}`,
        credentials: () => lane.creds!,
        firstConnectTimeoutMs: 30_000,
      },
      this.opts.logger,
    );
  }

  /** Fetches a new lane JWT and schedules the next renewal. Throws when the gateway refuses or cannot be reached. */
  private async renew(lane: Lane): Promise<void> {
    clearTimeout(lane.renewal);
    const response = await callGateway(this.opts.gateway(), agentTaskLanePath(lane.deploymentId, lane.version), 30_000);
    if (!response.ok)
      throw new Error(`the gateway refused a task lane for ${lane.deploymentId} v${lane.version}: ${await refusalOf(response)}`);
    const answer = await validatePayload(AgentTaskLane, await response.json());
    if (!answer.ok) throw new Error(`the gateway's task lane answer is invalid (${answer.reason})`);
    lane.creds = new TextEncoder().encode(this.opts.creds!(answer.value.jwt));
    const lifetime = Date.parse(answer.value.expiresAt) - Date.now();
    this.schedule(lane, Math.max(1000, (lifetime * 2) / 3));
  }

  private schedule(lane: Lane, inMs: number) {
    lane.renewal = setTimeout(() => {
      if (!this.lanes.has(taskConsumerName(lane.deploymentId, lane.version))) return;
      const renewed = this.renew(lane).catch((e: Error) => {
        this.opts.logger.warn(`renewing the task lane of ${lane.deploymentId} v${lane.version}: ${e.message}; again in 10 s`);
        this.schedule(lane, RENEW_RETRY_MS);
      });
      fireAndForget('renewing a task lane', this.opts.logger, renewed);
    }, inMs);
    lane.renewal.unref();
  }

  private close(lane: Lane) {
    clearTimeout(lane.renewal);
    const closing = lane.connection?.then((nc) => nc.close()).catch(() => undefined);
    if (closing) fireAndForget('closing a task lane', this.opts.logger, closing);
  }
}
