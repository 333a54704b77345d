import { HttpException, HttpStatus, Inject, Injectable, Logger } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { CONTAINER_LOG_LINE, type ContainerLogLine, subjectFilter } from '#tern/contracts';
import { decode, Messaging } from '#tern/messaging';
import { fireAndForget } from '#tern/timing';
import type { Deployment } from '#tern/persistence';
import { DeploymentsService } from './deployments.service.js';

const REFRESH_MS = 3000;
/** A line of a container not (yet) known: it may have been placed a moment ago, so look again, once per id this often… */
const UNKNOWN_RETRY_MS = 2000;
/** …and never sooner than this after the last look (a flood of made-up ids slows only its own stream). */
const REFRESH_GAP_MS = 50;
const KEEPALIVE_MS = 15_000;
const DEFAULT_WAIT_S = 3;

export interface LogStreamOptions {
  follow: boolean;
  tail?: number;
  waitSeconds?: number;
}

/** Container id → the machine it is placed on (null before placement). */
type Placements = Map<string, string | null>;

/** Why a line on this deployment's subject is not relayed, or undefined when it is. */
export function lineProblem(
  subject: { machineId: string; deploymentId: string; containerId: string },
  line: ContainerLogLine,
  placements: Placements,
): string | undefined {
  if (line.deploymentId !== subject.deploymentId || line.containerId !== subject.containerId) {
    return `its payload names container ${line.containerId} of deployment ${line.deploymentId}, its subject ${subject.containerId} of ${subject.deploymentId}`;
  }
  if (!placements.has(subject.containerId)) return `container ${subject.containerId} is not one of the deployment's`;
  if (placements.get(subject.containerId) !== subject.machineId) {
    return `container ${subject.containerId} is not placed on machine ${subject.machineId}`;
  }
  return undefined;
}

/**
 * Streams a deployment's log lines as server-sent events (`event: line`, data: ContainerLogLine).
 * Lines are only relayed live from core NATS: the agents keep the files, nothing is stored
 * centrally. Each stream subscribes to its own deployment's subjects only
 * (`tern.logs.*.<deploymentId>.*.v1`), and relays a line only when its container is one of the
 * deployment's and placed on the machine whose id the subject carries (an agent can publish
 * only under its own machine id, so no machine writes into another's containers' logs). An API
 * token holds at most LOG_FOLLOWS_PER_TOKEN streams at once on this gateway.
 */
@Injectable()
export class DeploymentLogsService {
  private readonly logger = new Logger('deployment-logs');
  /** Open streams per API token id. */
  private readonly openByToken = new Map<string, number>();

  constructor(
    private readonly messaging: Messaging,
    private readonly deployments: DeploymentsService,
    @Inject(TERN_CONFIG) private readonly config: TernConfig,
  ) {}

  /** Takes one of the token's stream places (429 when it holds them all); returns its release. */
  admit(tokenId: string): () => void {
    const cap = this.config.logs.followsPerToken;
    const open = this.openByToken.get(tokenId) ?? 0;
    if (open >= cap) {
      throw new HttpException(
        `this token already follows ${open} log streams, the most it may at once (LOG_FOLLOWS_PER_TOKEN=${cap}): close one first`,
        HttpStatus.TOO_MANY_REQUESTS,
      );
    }
    this.openByToken.set(tokenId, open + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.openByToken.get(tokenId) ?? 1) - 1;
      if (left > 0) this.openByToken.set(tokenId, left);
      else this.openByToken.delete(tokenId);
    };
  }

  async stream(deployment: Deployment, out: ServerResponse, opts: LogStreamOptions): Promise<void> {
    let placements = await this.placementsOf(deployment.id);
    let refreshedAt = Date.now();
    const refresh = async () => {
      try {
        placements = await this.placementsOf(deployment.id);
        refreshedAt = Date.now();
      } catch (e) {
        this.logger.warn(`containers of ${deployment.name}: ${(e as Error).message}`);
      }
    };
    // Subscribed (and the server told) before the info event, so a follower that saw it misses no line.
    const sub = this.messaging.nc.subscribe(
      this.messaging.ns.subject(subjectFilter(CONTAINER_LOG_LINE, undefined, deployment.id, undefined)),
    );
    await this.messaging.nc.flush();
    out.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    out.write(
      `event: info\ndata: ${JSON.stringify({ deployment: deployment.name, containers: [...placements.keys()], follow: opts.follow, stored: false })}\n\n`,
    );

    let sent = 0;
    let closed = false;
    let dropped = 0;
    /** Unknown container id → when the placements were last read for it. */
    const lookedUp = new Map<string, number>();
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
    timers.push(setInterval(() => fireAndForget(`refreshing the containers of ${deployment.name}`, this.logger, refresh()), REFRESH_MS));
    if (!opts.follow) timers.push(setTimeout(close, (opts.waitSeconds ?? DEFAULT_WAIT_S) * 1000));

    for await (const msg of sub) {
      const decoded = await decode(CONTAINER_LOG_LINE.payload, msg.data);
      if (!decoded.ok || closed) continue;
      // Wire subject: <namespace>.logs.<machineId>.<deploymentId>.<containerId>.v1
      const [, , machineId, deploymentId, containerId] = msg.subject.split('.');
      const subject = { machineId, deploymentId, containerId };
      if (!placements.has(containerId) && (lookedUp.get(containerId) ?? 0) < Date.now() - UNKNOWN_RETRY_MS) {
        if (lookedUp.size >= 1000) lookedUp.clear();
        lookedUp.set(containerId, Date.now());
        await new Promise((r) => setTimeout(r, Math.max(0, refreshedAt + REFRESH_GAP_MS - Date.now())));
        await refresh();
      }
      const problem = lineProblem(subject, decoded.value, placements);
      if (problem) {
        if (dropped++ === 0) this.logger.warn(`dropped a log line for ${deployment.name} from machine ${machineId}: ${problem}`);
        continue;
      }
      out.write(`event: line\ndata: ${JSON.stringify(decoded.value)}\n\n`);
      if (opts.tail && ++sent >= opts.tail) close();
    }
    close();
  }

  private async placementsOf(deploymentId: string): Promise<Placements> {
    const rows = await this.deployments.containerPlacements(deploymentId);
    return new Map(rows.map((r) => [r.id, r.machineId]));
  }
}
