import { Readable } from 'node:stream';
import { Injectable, Logger } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { type DeploymentRecord, endpointLimits, HTTP_METHODS, type HttpMethod } from '#tern/contracts';
import { InvokeError, type InvokeResponse } from '#tern/messaging';
import { ContainersRepository } from '#tern/persistence';
import { ApiError } from '#tern/service';
import type { Principal } from '../auth/principal.js';
import { NOTICE_HEADER, parseEndpointUrl, pathNotice, pinnedVersion, SERVED_VERSION_HEADER, VERSION_HEADER } from './endpoint-path.js';
import { forwardable } from './headers.js';
import { InvokeClient } from './invoke-client.js';
import type { Lane } from './lane.js';
import { LanesService } from './lanes.service.js';
import { originalContentType, requestIdOf } from './raw-body.js';
import { EndedEarly, type EndReason, RequestLimits } from './request-limits.js';
import { RequestStats } from './request-stats.service.js';
import { RoutesMirror, TABLE_NOT_LOADED } from './routes-mirror.js';

/** How often a request whose container vanished before answering is sent to another one with room. */
const RETRIES_ON_GONE = 2;
/** How long after the gateway's own total limit the agent ends a request by itself. */
const AGENT_GRACE_MS = 2_000;

/**
 * The data plane: an HTTP request for `/endpoint/<name>…` is sent to the least-loaded ready
 * container of that version (or held until one has room) and its response streamed back.
 */
@Injectable()
export class EndpointsService {
  private readonly logger = new Logger('endpoints');

  constructor(
    private readonly invoker: InvokeClient,
    private readonly table: RoutesMirror,
    private readonly lanes: LanesService,
    private readonly stats: RequestStats,
    private readonly containers: ContainersRepository,
  ) {}

  async forward(principal: Principal, request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const requestId = requestIdOf(request);
    const { target, method, record } = await this.resolve(principal, request, reply);
    const limits = endpointLimits(record.spec);
    const arrived = Date.now();
    const deadline = arrived + limits.firstByteMs;
    const clock = new RequestLimits(record.name, limits.idleMs);
    reply.raw.on('close', () => {
      if (!reply.raw.writableFinished) clock.end('client_closed', 499, 'the client closed the connection');
    });
    clock.untilStart(
      deadline,
      `no response from "${record.name}" v${record.version} started within ${limits.firstByteMs / 1000} s (the deployment's timeout)`,
    );
    clock.inAll(arrived + limits.totalMs, `the request passed ${limits.totalMs / 1000} s in all (the deployment's max_duration)`);
    const lane = this.lanes.lane(record.deploymentId, record.version);
    const headers = forwardable(request.headers, ['authorization', 'host', 'content-length', 'content-type', VERSION_HEADER]);
    const contentType = originalContentType(request);
    if (contentType) headers['content-type'] = contentType;
    headers['x-tern-request-id'] = requestId;
    const tern: Record<string, string> = { [SERVED_VERSION_HEADER]: String(record.version) };
    const notice = pathNotice(target.name, target.path, record.version, (v) => !!this.table.record(record.deploymentId, v));
    if (notice) tern[NOTICE_HEADER] = notice;
    const outgoing: OutgoingCall = {
      requestId,
      record,
      lane,
      deadline,
      method,
      path: target.path,
      headers,
      body: Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0),
      // The agent's own cap, a little after ours so that ours, which names the limit, ends it.
      agentEndsAt: arrived + limits.totalMs + AGENT_GRACE_MS,
    };
    try {
      const { containerId, response, started } = await this.send(outgoing, clock);
      clock.started();
      this.respond(reply, response, { containerId, lane, started, clock, record, tern });
    } catch (e) {
      clock.clear();
      throw e;
    }
  }

  /**
   * The deployment version a request names, or the 4xx/503 that says why there is none to send it
   * to; from when the version is known, the request counts in its stats whatever its outcome.
   */
  private async resolve(principal: Principal, request: FastifyRequest, reply: FastifyReply) {
    const target = parseEndpointUrl(request.url);
    if (!target) throw new ApiError(404, 'expected /endpoint/<name>[@<version>][/<path>]');
    const pin = pinnedVersion(target, request.headers[VERSION_HEADER]);
    if ('problem' in pin) throw new ApiError(400, pin.problem);
    const method = request.method.toUpperCase() as HttpMethod;
    if (!HTTP_METHODS.includes(method)) throw new ApiError(405, `method ${request.method} is not supported on endpoints`);

    if (!(await this.table.ready())) throw new ApiError(503, TABLE_NOT_LOADED);
    const found = this.table.find(principal.workspaceId, target.name, pin.version);
    if (!found.known) throw new ApiError(404, `deployment "${target.name}" not found`);
    const record = found.record;
    if (!record) throw new ApiError(404, `deployment "${target.name}" has no version ${pin.version}`);
    this.stats.observe(record, reply.raw);
    if (record.spec.kind !== 'endpoint') {
      const where =
        record.spec.kind === 'function'
          ? `: call it at /function/${target.name}`
          : record.spec.kind === 'task_queue'
            ? `: submit to /taskqueue/${target.name}`
            : '';
      throw new ApiError(400, `deployment "${target.name}" is a ${record.spec.kind}, not an endpoint${where}`);
    }
    if (record.state === 'stopped') throw new ApiError(503, `deployment "${target.name}" stopped: start it to serve requests`);
    return { target, method, record };
  }

  /**
   * Invokes a container with room and waits for its response head. A container that vanished
   * before the request reached it (no responders) is marked suspect and another one with room
   * tried, at most RETRIES_ON_GONE times; any other failure ends the request with its status.
   */
  private async send(
    call: OutgoingCall,
    clock: RequestLimits,
  ): Promise<{ containerId: string; response: InvokeResponse; started: number }> {
    const { lane, record } = call;
    for (let attempt = 0; ; attempt++) {
      const containerId = await this.takeContainer(lane, record, call.deadline, attempt > 0, clock);
      const started = Date.now();
      try {
        const machineId = lane.machineOf(containerId);
        if (!machineId) throw new InvokeError(503, `container ${containerId} is no longer routed`);
        const response = await this.invoker.send(
          { machineId, containerId },
          {
            requestId: call.requestId,
            deploymentId: record.deploymentId,
            method: call.method,
            path: call.path,
            headers: call.headers,
            timeoutMs: Math.max(1, call.agentEndsAt - Date.now()),
          },
          call.body,
          { signal: clock.signal },
        );
        return { containerId, response, started };
      } catch (e) {
        lane.release(containerId);
        if (!(e instanceof InvokeError)) throw e;
        if (e instanceof EndedEarly) throw new ApiError(e.code, e.message);
        if (e.code === 503 || e.code === 502) lane.markSuspect(containerId);
        // No responders: the request never reached a container, so another one may take it.
        if (e.code === 503 && attempt < RETRIES_ON_GONE && lane.hasRoom()) continue;
        if (e.code === 503)
          throw new ApiError(503, `container ${containerId} of "${record.name}" went away before answering; retry shortly`);
        throw new ApiError(e.code, e.message);
      }
    }
  }

  /** A container with room now, or once one has room; 429/504 when neither can be (499 when its client left). */
  private async takeContainer(
    lane: Lane,
    record: DeploymentRecord,
    deadline: number,
    retry: boolean,
    clock: RequestLimits,
  ): Promise<string> {
    if (retry) {
      const now = lane.tryAcquire();
      if (now) return now;
      throw new ApiError(503, `no container of "${record.name}" is answering; retry shortly`);
    }
    const queued = lane.buffered;
    const outcome = lane.acquire(Math.max(1, deadline - Date.now()), clock.signal);
    if (outcome === 'full')
      throw new ApiError(429, `buffer full: ${lane.buffered} requests already wait for "${record.name}" v${record.version}`);
    if (lane.buffered > queued) this.lanes.askForCapacity(lane);
    const result = await outcome;
    if ('containerId' in result) return result.containerId;
    // The client left. (The timeout's own timer may fire first: the 504 below says why it passed.)
    if (clock.ended?.reason === 'client_closed') throw new ApiError(clock.ended.code, clock.ended.message);
    const now = this.table.record(record.deploymentId, record.version);
    if (!now) throw new ApiError(404, `deployment "${record.name}" was deleted`);
    if (now.state === 'stopped') throw new ApiError(503, `deployment "${record.name}" stopped: start it to serve requests`);
    // Rare and slow already: the record says why, so the caller need not go looking.
    const why = await this.containers
      .whyNoContainer(record.deploymentId, record.version, new Date(deadline - record.spec.timeoutSeconds * 1000))
      .catch(() => undefined);
    throw new ApiError(
      504,
      `no container of "${record.name}" v${record.version} could take the request within ${record.spec.timeoutSeconds} s${why ? `; ${why}` : ''}`,
    );
  }

  private respond(reply: FastifyReply, response: InvokeResponse, call: AnsweredCall): void {
    const { containerId, lane, started, clock, record } = call;
    reply.code(response.status).headers({ ...forwardable(response.headers), 'x-tern-container-id': containerId, ...call.tern });
    if (response.whole) {
      // Head and body came in one message: answer with the bytes, no stream to pump.
      clock.clear();
      lane.release(containerId, Date.now() - started);
      void reply.send(Buffer.from(response.whole.buffer, response.whole.byteOffset, response.whole.byteLength));
      return;
    }
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      clock.clear();
      lane.release(containerId, Date.now() - started);
    };
    const logger = this.logger;
    const where = `container ${containerId} of "${record.name}" v${record.version}`;
    const sse = /^\s*text\/event-stream/i.test(response.headers['content-type'] ?? '');
    const stream = Readable.from(
      (async function* () {
        const chunks = response.body[Symbol.asyncIterator]();
        let atEventEnd = true;
        try {
          for (;;) {
            clock.waiting();
            const next = await chunks.next();
            clock.heard();
            if (next.done) return;
            if (sse) atEventEnd = endsEvent(next.value);
            yield next.value;
          }
        } catch (e) {
          if (e instanceof InvokeError && (e.code === 502 || e.code === 503)) lane.markSuspect(containerId);
          const ended = e instanceof EndedEarly ? e : undefined;
          // Nobody is left to tell.
          if (ended?.reason === 'client_closed') throw e;
          logger.warn(
            ended
              ? `ended the response of ${where} (${ended.reason}): ${ended.message}`
              : `response from ${where} broke off: ${(e as Error).message}`,
          );
          // The status is out: an event stream ends with an error event its client reads; any other
          // body is aborted (no last chunk), so its client sees a broken transfer, never a clean end.
          if (!sse) throw e;
          yield sseError(e as Error, ended?.reason, atEventEnd);
        } finally {
          release();
          await chunks.return?.();
        }
      })(),
    );
    stream.on('close', release);
    void reply.send(stream);
  }
}

/** A request on its way to a container of its version. */
interface OutgoingCall {
  requestId: string;
  record: DeploymentRecord;
  lane: Lane;
  /** When its response must have started (ms): until then it may wait for a container with room. */
  deadline: number;
  method: HttpMethod;
  path: string;
  headers: Record<string, string>;
  body: Buffer;
  /** When the agent gives up on it by itself (ms). */
  agentEndsAt: number;
}

/** What respond needs of the call that got a response. */
interface AnsweredCall {
  containerId: string;
  lane: Lane;
  started: number;
  clock: RequestLimits;
  record: DeploymentRecord;
  /** Tern's own response headers (the version that answered, a notice). */
  tern: Record<string, string>;
}

/** Whether an SSE chunk ends at an event's end (a blank line), so an error event may follow it as is. */
function endsEvent(chunk: Uint8Array): boolean {
  const n = chunk.length;
  return n >= 2 && chunk[n - 1] === 0x0a && (chunk[n - 2] === 0x0a || (n >= 3 && chunk[n - 2] === 0x0d && chunk[n - 3] === 0x0a));
}

/**
 * `event: error` with an OpenAI-style error object (`{"error": {"message", "type", "code"}}`):
 * what OpenAI-compatible clients raise from an error event. After a partial event, a blank line
 * ends that one first.
 */
function sseError(e: Error, reason: EndReason | undefined, atEventEnd: boolean): Buffer {
  const code = e instanceof InvokeError ? e.code : 502;
  const data = JSON.stringify({ error: { message: e.message, type: reason ?? 'upstream_error', code } });
  return Buffer.from(`${atEventEnd ? '' : '\n\n'}event: error\ndata: ${data}\n\n`);
}
