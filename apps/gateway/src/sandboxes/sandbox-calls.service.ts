import { randomUUID } from 'node:crypto';
import { posix } from 'node:path';
import { Readable } from 'node:stream';
import { BadRequestException, Injectable, Logger, NotFoundException } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { HTTP_METHODS, type HttpMethod, SANDBOX_CALL, SANDBOX_WORKDIR } from '#tern/contracts';
import { invoke, InvokeError, Messaging } from '#tern/messaging';
import type { Sandbox } from '#tern/persistence';
import { forwardable } from '../endpoints/headers.js';
import { originalContentType } from '../endpoints/raw-body.js';
import type { Principal } from '../auth/principal.js';
import { SandboxesService } from './sandboxes.service.js';

/** The longest a files or processes call may take on the agent (a 64 MiB file over a slow link). */
const CALL_TIMEOUT_MS = 120_000;

export interface SandboxCall {
  method: HttpMethod;
  /** The agent's route: `/exec`, `/processes/<pid>`, `/files/list`, … */
  route: string;
  /** A file path, made absolute against the sandbox's workdir. */
  path?: string;
  body?: Uint8Array;
  /** exec: how long the process may run (its own timeout, bounded by the sandbox's lifetime). */
  timeoutMs?: number;
  /** A port's request: the caller's headers go in, and all of the answer's come back. */
  headers?: Record<string, string>;
}

function portMethod(request: FastifyRequest): HttpMethod {
  const method = request.method.toUpperCase() as HttpMethod;
  if (!HTTP_METHODS.includes(method)) throw new BadRequestException(`method ${request.method} is not supported on sandbox ports`);
  return method;
}

/** A request to a sandbox's port as the agent passes it on: the caller's headers less Tern's credential, its body as it came. */
function portCall(request: FastifyRequest, method: HttpMethod, port: number, rest: string): SandboxCall {
  const headers = forwardable(request.headers, ['authorization', 'host', 'content-length', 'content-type']);
  const contentType = originalContentType(request);
  if (contentType) headers['content-type'] = contentType;
  const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
  const path = rest.startsWith('/') || rest === '' ? rest : `/${rest}`;
  return { method, route: `/ports/${port}${path}`, body, headers };
}

/**
 * Carries a call of the sandbox API to the sandbox's agent (SANDBOX_CALL over NATS: the machine
 * needs no inbound port) once the caller's workspace is known to own a running sandbox, and
 * streams the agent's answer back as it comes (an exec's NDJSON, a file's bytes).
 */
@Injectable()
export class SandboxCallsService {
  private readonly logger = new Logger('sandbox-calls');

  constructor(
    private readonly sandboxes: SandboxesService,
    private readonly messaging: Messaging,
  ) {}

  /** `ANY /sandbox/<id>/<port>/<rest>` to the sandbox's port (exposed first: 404 otherwise). */
  async forwardToPort(p: Principal, request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const m = /^\/sandbox\/([^/?]+)\/([^/?]+)(.*)$/.exec(request.url);
    if (!m) throw new NotFoundException('expected /sandbox/<id>/<port>/<path>');
    const [, id, port, rest] = m;
    const method = portMethod(request);
    const sandbox = await this.sandboxes.running(p, id);
    if (!sandbox.ports.includes(Number(port)))
      throw new NotFoundException(`port ${port} of sandbox ${id} is not exposed (POST /api/v1/sandboxes/${id}/ports {"port": ${port}})`);
    return this.send(sandbox, portCall(request, method, Number(port), rest), reply);
  }

  /** `ANY /sandbox-public/<token>/<rest>`: a public port, no workspace token asked (404 for an unknown token). */
  async forwardToPublicPort(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const m = /^\/sandbox-public\/([^/?]+)(.*)$/.exec(request.url);
    if (!m) throw new NotFoundException('expected /sandbox-public/<token>/<path>');
    const method = portMethod(request);
    const { sandbox, port } = await this.sandboxes.publicPort(m[1]);
    return this.send(sandbox, portCall(request, method, port, m[2]), reply);
  }

  async forward(p: Principal, id: string, call: SandboxCall, reply: FastifyReply): Promise<void> {
    return this.send(await this.sandboxes.running(p, id), call, reply);
  }

  private async send(sandbox: Sandbox, call: SandboxCall, reply: FastifyReply): Promise<void> {
    const id = sandbox.id;
    const workdir = typeof sandbox.spec.workdir === 'string' ? sandbox.spec.workdir : SANDBOX_WORKDIR;
    const query = call.path === undefined ? '' : `?path=${encodeURIComponent(posix.resolve(workdir, call.path))}`;
    const lifetimeLeftMs = new Date(sandbox.createdAt).getTime() + sandbox.timeoutSeconds * 1000 - Date.now();
    const abort = new AbortController();
    reply.raw.on('close', () => {
      if (!reply.raw.writableFinished) abort.abort();
    });
    let response;
    try {
      response = await invoke(
        this.messaging,
        { machineId: sandbox.machineId!, containerId: id },
        {
          requestId: randomUUID().replace(/-/g, ''),
          deploymentId: id,
          method: call.method,
          path: `${call.route}${query}`,
          headers: call.headers ?? {},
          timeoutMs: Math.max(1000, Math.min(call.timeoutMs ?? CALL_TIMEOUT_MS, lifetimeLeftMs)),
        },
        call.body ?? new Uint8Array(),
        { signal: abort.signal, contract: SANDBOX_CALL },
      );
    } catch (e) {
      if (!(e instanceof InvokeError)) throw e;
      const status = e.code === 503 ? 502 : e.code;
      const message =
        e.code === 503 ? `the agent of sandbox ${id} does not answer (machine ${sandbox.machineId}): ${e.message}` : e.message;
      void reply.code(status).send({ statusCode: status, message });
      return;
    }
    const logger = this.logger;
    const body = Readable.from(
      (async function* () {
        try {
          yield* response.body;
        } catch (e) {
          logger.warn(`answer of sandbox ${id} broke off: ${(e as Error).message}`);
          throw e;
        }
      })(),
    );
    const headers: Record<string, string> = call.headers ? forwardable(response.headers) : {};
    for (const name of ['content-type', 'x-tern-process-id']) if (response.headers[name]) headers[name] = response.headers[name];
    void reply.code(response.status).headers(headers).send(body);
  }
}
