import { Injectable, Logger } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import { CONTAINER_LOG_LINE } from '#tern/contracts';
import { decode, Messaging } from '#tern/messaging';
import type { Deployment } from '#tern/persistence';
import { DeploymentsService } from './deployments.service.js';

const REFRESH_MS = 3000;
const KEEPALIVE_MS = 15_000;
const DEFAULT_WAIT_S = 3;

export interface LogStreamOptions {
  follow: boolean;
  tail?: number;
  waitSeconds?: number;
}

/**
 * Streams a deployment's log lines as server-sent events (`event: line`, data: ContainerLogLine).
 * Lines are only relayed live from core NATS: the agents keep the files, nothing is stored
 * centrally. One subscription to every container's subject, filtered by the deployment id the
 * agent stamps on each line or by this deployment's container ids (refreshed, so containers that
 * start later are picked up).
 */
@Injectable()
export class DeploymentLogsService {
  private readonly logger = new Logger('deployment-logs');

  constructor(
    private readonly messaging: Messaging,
    private readonly deployments: DeploymentsService,
  ) {}

  async stream(deployment: Deployment, out: ServerResponse, opts: LogStreamOptions): Promise<void> {
    let ids = new Set(await this.deployments.containerIds(deployment.id));
    out.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    out.write(
      `event: info\ndata: ${JSON.stringify({ deployment: deployment.name, containers: [...ids], follow: opts.follow, stored: false })}\n\n`,
    );

    let sent = 0;
    let closed = false;
    const sub = this.messaging.nc.subscribe(this.messaging.subject(CONTAINER_LOG_LINE));
    const timers: NodeJS.Timeout[] = [];
    const close = () => {
      if (closed) return;
      closed = true;
      sub.unsubscribe();
      timers.forEach(clearInterval);
      if (!out.writableEnded) out.end();
    };
    out.on('close', close);
    timers.push(setInterval(() => !closed && out.write(': keep-alive\n\n'), KEEPALIVE_MS));
    timers.push(
      setInterval(() => {
        this.deployments
          .containerIds(deployment.id)
          .then((fresh) => (ids = new Set(fresh)))
          .catch((e) => this.logger.warn(`container ids of ${deployment.name}: ${(e as Error).message}`));
      }, REFRESH_MS),
    );
    if (!opts.follow) timers.push(setTimeout(close, (opts.waitSeconds ?? DEFAULT_WAIT_S) * 1000));

    for await (const msg of sub) {
      const decoded = await decode(CONTAINER_LOG_LINE.payload, msg.data);
      if (!decoded.ok || closed) continue;
      const line = decoded.value;
      if (line.deploymentId !== deployment.id && !ids.has(line.containerId)) continue;
      out.write(`event: line\ndata: ${JSON.stringify(line)}\n\n`);
      if (opts.tail && ++sent >= opts.tail) close();
    }
    close();
  }
}
