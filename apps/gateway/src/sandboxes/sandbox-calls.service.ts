import { randomUUID } from 'node:crypto';
import { posix } from 'node:path';
import { Readable } from 'node:stream';
import { Injectable, Logger } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { type HttpMethod, SANDBOX_CALL, SANDBOX_WORKDIR } from '#tern/contracts';
import { invoke, InvokeError, Messaging } from '#tern/messaging';
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

  async forward(p: Principal, id: string, call: SandboxCall, reply: FastifyReply): Promise<void> {
    const sandbox = await this.sandboxes.running(p, id);
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
          headers: {},
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
    const headers: Record<string, string> = {};
    for (const name of ['content-type', 'x-tern-process-id']) if (response.headers[name]) headers[name] = response.headers[name];
    void reply.code(response.status).headers(headers).send(body);
  }
}
