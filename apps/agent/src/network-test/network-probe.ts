import { Inject, Injectable, Logger } from '@nestjs/common';
import { type NatsConnection } from '@nats-io/transport-node';
import {
  MACHINE_NETWORK_TESTED,
  type MachineNetworkTested,
  NETWORK_TEST_ECHO,
  NETWORK_TEST_HTTP_PATH,
  type NetworkPathResult,
} from '#tern/contracts';
import { Messaging, NATS_CONNECTION } from '#tern/messaging';
import { AGENT_CONTEXT, type AgentContext } from '../agent-context.js';
import { networkLatency, networkThroughput } from '../metrics.js';
import { echoChunkBytes, failedPath, measureHttpLeg, measureNatsLeg, networkVerdict } from './measure.js';

/** Bytes each way on the HTTP leg (the gateway accepts up to NETWORK_TEST_HTTP_MAX_BYTES). */
const HTTP_TEST_BYTES = 8 * 1024 * 1024;

/**
 * The agent's half of the join-time network test (the gateway's NetworkTestService answers it):
 * measures throughput and latency to the control plane over the NATS
 * connection (echoes the gateway answers) and over HTTP (the gateway's sink and source),
 * published as MACHINE_NETWORK_TESTED for the scheduler to judge against the pool's minimum.
 */
@Injectable()
export class NetworkProbe {
  private readonly logger = new Logger('network-test');

  constructor(
    private readonly messaging: Messaging,
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
    @Inject(AGENT_CONTEXT) private readonly ctx: AgentContext,
  ) {}

  async run(): Promise<MachineNetworkTested> {
    const nats = await this.leg('NATS', () => this.natsLeg());
    const http = await this.leg('HTTP', () => this.httpLeg());
    const result: MachineNetworkTested = { machineId: this.ctx.registration.machineId, nats, http, testedAt: new Date().toISOString() };
    const min = this.ctx.registration.minNetworkMbps;
    const verdict = networkVerdict(nats, http, min);
    this.ctx.state.network = { nats, http, verdict, minNetworkMbps: min, testedAt: Date.now() };
    for (const [path, leg] of [
      ['nats', nats],
      ['http', http],
    ] as const) {
      networkThroughput.set({ path }, leg.throughputMbps);
      networkLatency.set({ path }, leg.latencyMs);
    }
    const summary = `NATS ${nats.error ? 'failed' : `${nats.throughputMbps} Mbps, ${nats.latencyMs} ms`}; HTTP ${http.error ? 'failed' : `${http.throughputMbps} Mbps, ${http.latencyMs} ms`}`;
    if (verdict.ok) this.logger.log({ nats, http }, `network test: ${summary}`);
    else
      this.logger.warn(
        { nats, http, minNetworkMbps: min },
        `network test: ${summary}; the scheduler will not place work here: ${verdict.reason}`,
      );
    try {
      await this.messaging.publish(MACHINE_NETWORK_TESTED, result, { msgId: `${result.machineId}-network-${result.testedAt}` });
    } catch (e) {
      this.logger.warn(`could not publish the network test result (${(e as Error).message})`);
    }
    return result;
  }

  private async leg(name: string, measure: () => Promise<NetworkPathResult>): Promise<NetworkPathResult> {
    try {
      return await measure();
    } catch (e) {
      const message = (e as Error).message;
      this.logger.warn(`network test over ${name} failed: ${message}`);
      return failedPath(message);
    }
  }

  private natsLeg(): Promise<NetworkPathResult> {
    return measureNatsLeg({
      chunkBytes: echoChunkBytes(this.nc.info?.max_payload),
      echo: (data, replyBytes) =>
        this.messaging.request(NETWORK_TEST_ECHO, { data, replyBytes }, { tokens: [this.ctx.registration.machineId], timeoutMs: 15_000 }),
    });
  }

  private httpLeg(): Promise<NetworkPathResult> {
    const url = `${this.ctx.settings.gatewayUrl}${NETWORK_TEST_HTTP_PATH}`;
    const auth = () => ({ authorization: `Bearer ${this.ctx.settings.token}` });
    const check = async (res: Response) => {
      if (res.ok) return;
      const body = (await res.json().catch(() => ({}))) as { message?: unknown };
      throw new Error(`${res.status} ${typeof body.message === 'string' ? body.message : res.statusText}`);
    };
    return measureHttpLeg({
      bytes: HTTP_TEST_BYTES,
      upload: async (bytes) => {
        const res = await fetch(url, {
          method: 'POST',
          headers: { ...auth(), 'content-type': 'application/octet-stream' },
          body: new Uint8Array(bytes).fill(0x5a),
          signal: AbortSignal.timeout(60_000),
        });
        await check(res);
        return ((await res.json()) as { receivedBytes: number }).receivedBytes;
      },
      download: async (bytes) => {
        const res = await fetch(`${url}?bytes=${bytes}`, { headers: auth(), signal: AbortSignal.timeout(60_000) });
        await check(res);
        let received = 0;
        for await (const chunk of res.body ?? []) received += (chunk as Uint8Array).byteLength;
        return received;
      },
    });
  }
}
