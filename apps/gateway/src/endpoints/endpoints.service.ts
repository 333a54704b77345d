import { Readable } from 'node:stream';
import { Injectable, Logger } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { type DeploymentRecord, HTTP_METHODS, type HttpMethod } from '#tern/contracts';
import { invoke, InvokeError, type InvokeResponse, Messaging } from '#tern/messaging';
import { ContainersRepository } from '#tern/persistence';
import type { Principal } from '../auth/principal.js';
import { parseEndpointUrl } from './endpoint-path.js';
import { forwardable } from './headers.js';
import type { Lane } from './lane.js';
import { LanesService } from './lanes.service.js';
import { originalContentType, requestIdOf } from './raw-body.js';
import { RequestStats } from './request-stats.service.js';
import { RoutesMirror, TABLE_NOT_LOADED } from './routes-mirror.js';

/** How often a request whose container vanished before answering is sent to another one with room. */
const RETRIES_ON_GONE = 2;

export class EndpointHttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * The data plane: an HTTP request for `/endpoint/<name>…` is sent to the least-loaded ready
 * container of that version (or held until one has room) and its response streamed back.
 */
@Injectable()
export class EndpointsService {
  private readonly logger = new Logger('endpoints');

  constructor(
    private readonly messaging: Messaging,
    private readonly table: RoutesMirror,
    private readonly lanes: LanesService,
    private readonly stats: RequestStats,
    private readonly containers: ContainersRepository,
  ) {}

  async forward(principal: Principal, request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const requestId = requestIdOf(request);
    const target = parseEndpointUrl(request.url);
    if (!target) throw new EndpointHttpError(404, 'expected /endpoint/<name>[/v<N>][/<path>]');
    const method = request.method.toUpperCase() as HttpMethod;
    if (!HTTP_METHODS.includes(method)) throw new EndpointHttpError(405, `method ${request.method} is not supported on endpoints`);

    if (!(await this.table.ready())) throw new EndpointHttpError(503, TABLE_NOT_LOADED);
    const found = this.table.find(principal.workspaceId, target.name, target.version);
    if (!found.known) throw new EndpointHttpError(404, `deployment "${target.name}" not found`);
    const record = found.record;
    if (!record) throw new EndpointHttpError(404, `deployment "${target.name}" has no version ${target.version}`);
    this.stats.observe(record, reply.raw);
    if (record.spec.kind !== 'endpoint') {
      const where =
        record.spec.kind === 'function'
          ? `: call it at /function/${target.name}`
          : record.spec.kind === 'task_queue'
            ? `: submit to /taskqueue/${target.name}`
            : '';
      throw new EndpointHttpError(400, `deployment "${target.name}" is a ${record.spec.kind}, not an endpoint${where}`);
    }
    if (record.state === 'stopped') throw new EndpointHttpError(503, `deployment "${target.name}" stopped: start it to serve requests`);

    const timeoutMs = record.spec.timeoutSeconds * 1000;
    const deadline = Date.now() + timeoutMs;
    const lane = this.lanes.lane(record.deploymentId, record.version);
    const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
    const headers = forwardable(request.headers, ['authorization', 'host', 'content-length', 'content-type']);
    const contentType = originalContentType(request);
    if (contentType) headers['content-type'] = contentType;
    headers['x-tern-request-id'] = requestId;

    const abort = new AbortController();
    reply.raw.on('close', () => {
      if (!reply.raw.writableFinished) abort.abort();
    });

    for (let attempt = 0; ; attempt++) {
      const containerId = await this.takeContainer(lane, record, deadline, attempt > 0);
      const started = Date.now();
      let response: InvokeResponse;
      try {
        const machineId = lane.machineOf(containerId);
        if (!machineId) throw new InvokeError(503, `container ${containerId} is no longer routed`);
        response = await invoke(
          this.messaging,
          { machineId, containerId },
          {
            requestId,
            deploymentId: record.deploymentId,
            method,
            path: target.path,
            headers,
            timeoutMs: Math.max(1, deadline - Date.now()),
          },
          body,
          { signal: abort.signal },
        );
      } catch (e) {
        lane.release(containerId);
        if (!(e instanceof InvokeError)) throw e;
        if (e.code === 503 || e.code === 502) lane.markSuspect(containerId);
        // No responders: the request never reached a container, so another one may take it.
        if (e.code === 503 && attempt < RETRIES_ON_GONE && lane.hasRoom()) continue;
        if (e.code === 503)
          throw new EndpointHttpError(503, `container ${containerId} of "${record.name}" went away before answering; retry shortly`);
        throw new EndpointHttpError(e.code, e.message);
      }
      this.respond(reply, response, containerId, lane, started);
      return;
    }
  }

  /** A container with room now, or once one has room; 429/504 when neither can be. */
  private async takeContainer(lane: Lane, record: DeploymentRecord, deadline: number, retry: boolean): Promise<string> {
    if (retry) {
      const now = lane.tryAcquire();
      if (now) return now;
      throw new EndpointHttpError(503, `no container of "${record.name}" is answering; retry shortly`);
    }
    const queued = lane.buffered;
    const outcome = lane.acquire(Math.max(1, deadline - Date.now()));
    if (outcome === 'full')
      throw new EndpointHttpError(429, `buffer full: ${lane.buffered} requests already wait for "${record.name}" v${record.version}`);
    if (lane.buffered > queued) this.lanes.askForCapacity(lane);
    const result = await outcome;
    if ('containerId' in result) return result.containerId;
    const now = this.table.record(record.deploymentId, record.version);
    if (!now) throw new EndpointHttpError(404, `deployment "${record.name}" was deleted`);
    if (now.state === 'stopped') throw new EndpointHttpError(503, `deployment "${record.name}" stopped: start it to serve requests`);
    // Rare and slow already: the record says why, so the caller need not go looking.
    const why = await this.containers
      .whyNoContainer(record.deploymentId, record.version, new Date(deadline - record.spec.timeoutSeconds * 1000))
      .catch(() => undefined);
    throw new EndpointHttpError(
      504,
      `no container of "${record.name}" v${record.version} could take the request within ${record.spec.timeoutSeconds} s${why ? `; ${why}` : ''}`,
    );
  }

  private respond(reply: FastifyReply, response: InvokeResponse, containerId: string, lane: Lane, started: number): void {
    reply.code(response.status).headers({ ...forwardable(response.headers), 'x-tern-container-id': containerId });
    if (response.whole) {
      // Head and body came in one message: answer with the bytes, no stream to pump.
      lane.release(containerId, Date.now() - started);
      void reply.send(Buffer.from(response.whole.buffer, response.whole.byteOffset, response.whole.byteLength));
      return;
    }
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      lane.release(containerId, Date.now() - started);
    };
    const logger = this.logger;
    const stream = Readable.from(
      (async function* () {
        try {
          yield* response.body;
        } catch (e) {
          if (e instanceof InvokeError && (e.code === 502 || e.code === 503)) lane.markSuspect(containerId);
          logger.warn(`response from container ${containerId} broke off: ${(e as Error).message}`);
          throw e;
        } finally {
          release();
        }
      })(),
    );
    stream.on('close', release);
    void reply.send(stream);
  }
}
