import { randomUUID } from 'node:crypto';
import { BadRequestException, ConflictException, Injectable, Logger, NotFoundException, ServiceUnavailableException } from '@nestjs/common';
import {
  AGENT_SANDBOX_CREATE,
  AGENT_SANDBOX_REMOVE,
  type Contract,
  parseMemory,
  SANDBOX_ENDED,
  SANDBOX_STARTED,
  SANDBOX_DEFAULT_TIMEOUT_SECONDS,
  SANDBOX_WORKDIR,
  type SandboxList,
  type SandboxPortView,
  SandboxSpec,
  type SandboxView,
  SpecError,
} from '#tern/contracts';
import { Messaging, RequestError } from '#tern/messaging';
import { type EndingSandbox, type Sandbox, SandboxesRepository } from '#tern/persistence';
import { fireAndForget } from '#tern/timing';
import type { Principal } from '../auth/principal.js';
import { SandboxPlacer } from './sandbox-placer.js';
import { sandboxView } from './sandbox-views.js';

/** How long an agent may take to start a sandbox's container (a first start prepares the image). */
const CREATE_TIMEOUT_MS = 60_000;
const REMOVE_TIMEOUT_MS = 30_000;
const LIST_LIMIT = 100;

/**
 * Sandboxes' lives: placed (SandboxPlacer), started by their machine's agent (a request that
 * answers once the container runs), ended by DELETE, by SandboxSweeper (lifetime, idle timeout,
 * machine offline) or when the start fails. The row's state moves only forward.
 */
@Injectable()
export class SandboxesService {
  private readonly logger = new Logger('sandboxes');

  constructor(
    private readonly sandboxes: SandboxesRepository,
    private readonly placer: SandboxPlacer,
    private readonly messaging: Messaging,
  ) {}

  async create(p: Principal, spec: SandboxSpec): Promise<SandboxView> {
    let memoryBytes: number;
    try {
      memoryBytes = parseMemory(spec.memory ?? '512Mi');
    } catch (e) {
      if (e instanceof SpecError) throw new BadRequestException(e.message);
      throw e;
    }
    if (spec.network?.block && spec.network.allow) throw new BadRequestException('network takes block or allow, not both');
    if ((spec.gpu_count ?? 0) > 0 || (spec.gpu && spec.gpu !== 'any'))
      throw new BadRequestException('gpu: sandboxes with GPUs are not offered yet; leave gpu and gpu_count out');
    const id = `sb-${randomUUID()}`;
    const image = spec.image ?? 'host';
    const workdir = spec.workdir ?? SANDBOX_WORKDIR;
    const pool = spec.pool ?? 'default';
    const requested = { cpuMillicores: Math.round((spec.cpu ?? 1) * 1000), memoryBytes, gpuCount: 0 };
    const placed = await this.placer.reserve(
      {
        id,
        workspaceId: p.workspaceId,
        pool,
        spec: { image, workdir, env: spec.env ?? {}, ...(spec.network ? { network: spec.network } : {}) },
        requested,
        timeoutSeconds: spec.timeout ?? SANDBOX_DEFAULT_TIMEOUT_SECONDS,
        idleTimeoutSeconds: spec.idle_timeout ?? null,
      },
      { cpuMillicores: requested.cpuMillicores, memoryBytes, gpuTypes: [], gpuCount: 0, pool },
    );
    // The reason without the machine ids placement names: a workspace does not learn a shared pool's machines.
    if (!placed.placed)
      throw new ServiceUnavailableException(
        `no machine in pool "${pool}" can take the sandbox now: ${placed.reason.replace(/ \([^)]*\)$/, '')}`,
      );

    let reason: string | undefined;
    try {
      const reply = await this.messaging.request(
        AGENT_SANDBOX_CREATE,
        {
          sandboxId: id,
          workspaceId: p.workspaceId,
          image,
          env: spec.env ?? {},
          workdir,
          resources: requested,
          ...(spec.network ? { network: spec.network } : {}),
          requestedAt: new Date().toISOString(),
        },
        { tokens: [placed.machineId], timeoutMs: CREATE_TIMEOUT_MS },
      );
      if (!reply.running) reason = `machine ${placed.machineId} could not start it: ${reply.reason ?? 'no reason given'}`;
    } catch (e) {
      if (!(e instanceof RequestError)) throw e;
      reason = `machine ${placed.machineId} did not start it: ${e.message}`;
    }
    if (reason) {
      const failed = await this.sandboxes.end(id, 'failed', reason);
      if (failed) await this.ended(failed);
      throw new ServiceUnavailableException(reason);
    }
    const running = await this.sandboxes.markRunning(id);
    if (!running) {
      this.removeOnMachine(placed.machineId, id, 'ended while starting');
      return sandboxView((await this.sandboxes.findOfWorkspace(p.workspaceId, id))!);
    }
    await this.announce(SANDBOX_STARTED, `${id}:started`, {
      sandboxId: id,
      workspaceId: p.workspaceId,
      machineId: placed.machineId,
      resources: requested,
      at: new Date(running.startedAt!).toISOString(),
    });
    return sandboxView(running);
  }

  async list(p: Principal, live: boolean): Promise<SandboxList> {
    return { sandboxes: (await this.sandboxes.listOfWorkspace(p.workspaceId, live, LIST_LIMIT)).map(sandboxView) };
  }

  async get(p: Principal, id: string): Promise<SandboxView> {
    return sandboxView(await this.find(p, id));
  }

  /** Terminates it (idempotent: an ended sandbox is answered as it is). */
  async terminate(p: Principal, id: string): Promise<SandboxView> {
    await this.find(p, id);
    const ended = await this.sandboxes.end(id, 'terminated', 'deleted through the API');
    if (ended) await this.ended(ended);
    return this.get(p, id);
  }

  /** Exposes a port at `<gateway>/sandbox/<id>/<port>/`, reached with the workspace's token. */
  async exposePort(p: Principal, id: string, port: number, gatewayUrl: string): Promise<SandboxPortView> {
    await this.running(p, id);
    if (!(await this.sandboxes.exposePort(id, port))) throw new ConflictException(`sandbox ${id} is no longer running`);
    return { port, url: `${gatewayUrl}/sandbox/${id}/${port}/` };
  }

  async keepalive(p: Principal, id: string): Promise<SandboxView> {
    await this.running(p, id);
    return this.get(p, id);
  }

  /** The running sandbox a call goes to, its idle timeout started again; 404 unknown, 409 ended. */
  async running(p: Principal, id: string): Promise<Sandbox> {
    const sandbox = await this.find(p, id);
    if (sandbox.state !== 'running' || !sandbox.machineId || !(await this.sandboxes.touch(id)))
      throw new ConflictException(
        `sandbox ${id} is ${sandbox.state}${sandbox.stateReason ? ` (${sandbox.stateReason})` : ''}: create a new one`,
      );
    return sandbox;
  }

  /** After its row ended: metering hears of it, and its machine is told to remove it. */
  async ended(s: EndingSandbox): Promise<void> {
    // A failed one never ran (reputation counts the failed start); the others are metered up to here.
    if ((s.startedAt || s.state === 'failed') && s.machineId && s.state !== 'placing' && s.state !== 'running')
      await this.announce(SANDBOX_ENDED, `${s.id}:ended`, {
        sandboxId: s.id,
        workspaceId: s.workspaceId,
        machineId: s.machineId,
        resources: s.requested,
        state: s.state,
        reason: s.reason,
        at: new Date(s.endedAt).toISOString(),
      });
    if (!s.machineId) return;
    // A lost machine may still hear (a partition, a frozen agent), and a failed start may yet
    // succeed after the timeout: asked, without waiting on it.
    if (s.state === 'lost' || s.state === 'failed') this.removeOnMachine(s.machineId, s.id, s.reason);
    else await this.remove(s.machineId, s.id, s.reason);
  }

  /**
   * A sandbox fact on EVENTS (Nats-Msg-Id per sandbox and fact, so a repeat is dropped). A
   * failed publish is logged: its usage then stays open (see docs/architecture.md, Sandboxes).
   */
  private async announce<T extends object>(contract: Contract<T>, msgId: string, payload: T): Promise<void> {
    try {
      await this.messaging.publish(contract, payload, { msgId });
    } catch (e) {
      this.logger.error(`${contract.subject} for ${msgId} not published: ${(e as Error).message}`);
    }
  }

  /** Removes it from its machine; a machine that does not answer is logged (its container stays there: see docs, Sandboxes). */
  async remove(machineId: string, id: string, reason: string): Promise<void> {
    try {
      await this.messaging.request(AGENT_SANDBOX_REMOVE, { sandboxId: id, reason }, { tokens: [machineId], timeoutMs: REMOVE_TIMEOUT_MS });
    } catch (e) {
      this.logger.warn({ sandboxId: id, machineId }, `sandbox ${id} not removed from machine ${machineId}: ${(e as Error).message}`);
    }
  }

  private removeOnMachine(machineId: string, id: string, reason: string): void {
    fireAndForget(`removing sandbox ${id}`, this.logger, this.remove(machineId, id, reason));
  }

  private async find(p: Principal, id: string): Promise<Sandbox> {
    const sandbox = /^[\w-]{1,64}$/.test(id) ? await this.sandboxes.findOfWorkspace(p.workspaceId, id) : undefined;
    if (!sandbox) throw new NotFoundException(`sandbox ${id} not found`);
    return sandbox;
  }
}
