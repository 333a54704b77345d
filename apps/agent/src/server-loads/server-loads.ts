import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { request } from 'node:http';
import { deploymentKey, SERVER_LOAD_REPORT, type ServerLoadReport } from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import { Ticker } from '#tern/timing';
import { AGENT_CONTEXT, type AgentContext } from '../agent-context.js';
import type { ContainerRecord } from '../containers/container-spec.js';
import type { ContainerEndpoint } from '../invoke/forward.js';
import { LOAD_BODY_MAX_BYTES, parseServerLoad } from './parse-load.js';

/** How often each container's load is read: often enough for a 1 s control loop, rarely enough to cost its server nothing. */
export const SERVER_LOAD_EVERY_MS = 2000;
const PROBE_TIMEOUT_MS = 1000;

/**
 * Reads the load a ready container reports about itself (its spec's load_path, for a
 * concurrency policy's target_load) every 2 s and sends one ServerLoadReport per version. A
 * container that does not answer, or answers nothing usable, is left out of that report: the
 * autoscaler then scales it on its requests alone.
 */
@Injectable()
export class ServerLoads implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('server-loads');
  private readonly containers = new Map<string, { record: ContainerRecord; endpoint: ContainerEndpoint }>();
  private readonly ticker = new Ticker({ name: 'server load probe', everyMs: SERVER_LOAD_EVERY_MS, logger: this.logger }, () =>
    this.probe(),
  );

  constructor(
    private readonly messaging: Messaging,
    @Inject(AGENT_CONTEXT) private readonly ctx: AgentContext,
  ) {}

  onApplicationBootstrap() {
    this.ticker.start();
  }

  async onApplicationShutdown() {
    await this.ticker.stop();
  }

  /** A ready container: read its load if its spec asks for that. */
  track(record: ContainerRecord, endpoint: ContainerEndpoint) {
    if (record.loadProbe) this.containers.set(record.containerId, { record, endpoint });
  }

  untrack(containerId: string) {
    this.containers.delete(containerId);
  }

  private async probe() {
    const read = await Promise.all(
      [...this.containers.values()].map(async ({ record, endpoint }) => ({ record, load: await readLoad(endpoint, record.loadProbe!) })),
    );
    const reports = new Map<string, ServerLoadReport>();
    const at = new Date().toISOString();
    for (const { record, load } of read) {
      if (load === undefined || !this.containers.has(record.containerId)) continue;
      const key = deploymentKey(record.deploymentId, record.deploymentVersion);
      let report = reports.get(key);
      if (!report) {
        report = {
          machineId: this.ctx.registration.machineId,
          deploymentId: record.deploymentId,
          version: record.deploymentVersion,
          containers: [],
          at,
        };
        reports.set(key, report);
      }
      report.containers.push({ containerId: record.containerId, load });
    }
    for (const r of reports.values()) this.messaging.emit(SERVER_LOAD_REPORT, r, [r.deploymentId]);
  }
}

/** One GET of the load path; undefined for no answer, a non-2xx one, an oversized one or nothing usable in it. */
function readLoad(endpoint: ContainerEndpoint, probe: { path: string; metric?: string }): Promise<number | undefined> {
  return new Promise((resolve) => {
    const req = request(
      { host: endpoint.host, port: endpoint.port, path: probe.path, method: 'GET', timeout: PROBE_TIMEOUT_MS, agent: false },
      (res) => {
        const status = res.statusCode ?? 0;
        if (status < 200 || status >= 300) {
          res.resume();
          return resolve(undefined);
        }
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > LOAD_BODY_MAX_BYTES) return req.destroy(new Error('load answer too large'));
          chunks.push(chunk);
        });
        res.on('end', () => resolve(parseServerLoad(Buffer.concat(chunks).toString('utf8'), probe.metric)));
        res.on('error', () => resolve(undefined));
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${PROBE_TIMEOUT_MS} ms`)));
    req.on('error', () => resolve(undefined));
    req.end();
  });
}
