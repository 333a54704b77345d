import { randomBytes, randomUUID } from 'node:crypto';
import { BadRequestException, ConflictException, Injectable, Logger, NotFoundException, ServiceUnavailableException } from '@nestjs/common';
import {
  AGENT_SANDBOX_CREATE,
  AGENT_SANDBOX_REMOVE,
  type Contract,
  parseMemory,
  resolveVolumes,
  SANDBOX_ENDED,
  SANDBOX_STARTED,
  SANDBOX_DEFAULT_TIMEOUT_SECONDS,
  SANDBOX_WORKDIR,
  type SandboxCreate,
  type SandboxList,
  type SandboxPortView,
  SandboxSpec,
  type SandboxView,
  SpecError,
} from '#tern/contracts';
import { Messaging, RequestError } from '#tern/messaging';
import { type EndingSandbox, type Sandbox, SandboxesRepository, VolumesRepository } from '#tern/persistence';
import { needsVerifiedMachine } from '#tern/placement';
import { fireAndForget, sleep } from '#tern/timing';
import type { Principal } from '../auth/principal.js';
import { ImagePins } from '../images/image-pins.service.js';
import { SandboxPlacer } from './sandbox-placer.js';
import { publicPortPath, sandboxView } from './sandbox-views.js';

/** How long an agent may take to start a sandbox's container on the host image (a first start prepares it). */
const CREATE_TIMEOUT_MS = 60_000;
/** The same for a registry image: a first start on a machine pulls and unpacks it. */
const CREATE_PULL_TIMEOUT_MS = 300_000;
/** How long a create waits for the sandbox to run before it answers 202 (placing) when the caller names no `wait`. */
export const CREATE_WAIT_SECONDS = 60;
const REMOVE_TIMEOUT_MS = 30_000;
const LIST_LIMIT = 100;

/** The GPUs a sandbox asks for: `gpu` a type or "any" (one unless gpu_count says more), `gpu_count` alone any type. */
function sandboxGpus(spec: SandboxSpec): { count: number; type?: string } {
  const count = spec.gpu_count ?? (spec.gpu ? 1 : 0);
  if (spec.gpu && count === 0) throw new BadRequestException('gpu_count must be at least 1 when gpu is set');
  return { count, ...(spec.gpu && spec.gpu !== 'any' ? { type: spec.gpu } : {}) };
}

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
    private readonly volumes: VolumesRepository,
    private readonly imagePins: ImagePins,
  ) {}

  /**
   * The volumes the spec mounts, each one of the workspace's, none over the sandbox's own
   * /workspace: 400 with what to fix otherwise.
   */
  private async sandboxVolumes(p: Principal, spec: SandboxSpec): Promise<{ volume: string; mountPath: string; readOnly: boolean }[]> {
    let volumes;
    try {
      volumes = resolveVolumes(spec);
    } catch (e) {
      if (e instanceof SpecError) throw new BadRequestException(e.message);
      throw e;
    }
    for (const [i, v] of volumes.entries()) {
      if (v.mountPath === SANDBOX_WORKDIR)
        throw new BadRequestException(
          `volumes[${i}].path is the sandbox's own ${SANDBOX_WORKDIR}: mount the volume elsewhere (e.g. /data)`,
        );
      if (!(await this.volumes.find(p.workspaceId, v.name)))
        throw new BadRequestException(
          `volumes[${i}].name: volume ${v.name} not found in this workspace: create it first (tern volume create ${v.name})`,
        );
    }
    return volumes.map((v) => ({ volume: v.name, mountPath: v.mountPath, readOnly: v.readOnly }));
  }

  /**
   * Places the sandbox and has its machine start it. Answers once it runs, or after `waitMs`
   * with it still placing (the start goes on: GET follows it); 503 when no machine can take it
   * or its machine could not start it within the wait.
   */
  async create(p: Principal, spec: SandboxSpec, waitMs: number): Promise<SandboxView> {
    let memoryBytes: number;
    try {
      memoryBytes = parseMemory(spec.memory ?? '512Mi');
    } catch (e) {
      if (e instanceof SpecError) throw new BadRequestException(e.message);
      throw e;
    }
    if (spec.network?.block && spec.network.allow) throw new BadRequestException('network takes block or allow, not both');
    const gpu = sandboxGpus(spec);
    const volumes = await this.sandboxVolumes(p, spec);
    // As a deployment's: pinned to the digest its tag names now (a 400 naming it when the registry
    // has no such image, or it is another workspace's build), so the machine pulls those bytes.
    const image = await this.imagePins.pin(spec.image ?? 'host', p.workspaceId);
    const id = `sb-${randomUUID()}`;
    const workdir = spec.workdir ?? SANDBOX_WORKDIR;
    const pool = spec.pool ?? 'default';
    const requested = {
      cpuMillicores: Math.round((spec.cpu ?? 1) * 1000),
      memoryBytes,
      gpuCount: gpu.count,
      ...(gpu.type ? { gpuType: gpu.type } : {}),
    };
    const placed = await this.placer.reserve(
      {
        id,
        workspaceId: p.workspaceId,
        pool,
        spec: {
          image,
          workdir,
          env: spec.env ?? {},
          ...(spec.network ? { network: spec.network } : {}),
          // The machine may read (and commit) these volumes while this row says the sandbox is its own.
          ...(volumes.length ? { volumes: volumes.map((v) => ({ name: v.volume, path: v.mountPath, readOnly: v.readOnly })) } : {}),
        },
        requested,
        timeoutSeconds: spec.timeout ?? SANDBOX_DEFAULT_TIMEOUT_SECONDS,
        idleTimeoutSeconds: spec.idle_timeout ?? null,
      },
      {
        cpuMillicores: requested.cpuMillicores,
        memoryBytes,
        gpuTypes: gpu.type ? [gpu.type] : [],
        gpuCount: gpu.count,
        pool,
        verified: needsVerifiedMachine({
          verified: spec.placement?.verified,
          volumes: volumes.length,
          usesSecrets: false,
          privateImage: this.imagePins.isPrivate(image),
        }),
        ...(spec.placement?.min_reputation !== undefined ? { minReputation: spec.placement.min_reputation } : {}),
      },
    );
    // The reason without the machine ids placement names: a workspace does not learn a shared pool's machines.
    if (!placed.placed)
      throw new ServiceUnavailableException(
        `no machine in pool "${pool}" can take the sandbox now: ${placed.reason.replace(/ \([^)]*\)$/, '')}`,
      );

    const command: SandboxCreate = {
      sandboxId: id,
      workspaceId: p.workspaceId,
      image,
      env: spec.env ?? {},
      workdir,
      resources: requested,
      ...(spec.network ? { network: spec.network } : {}),
      ...(volumes.length ? { volumes } : {}),
      requestedAt: new Date().toISOString(),
    };
    const starting = this.start(command, placed.machineId);
    const answered = new AbortController();
    const view = await Promise.race([starting, sleep(waitMs, answered.signal).then(() => undefined)]).finally(() => answered.abort());
    if (view) return view;
    fireAndForget(`starting sandbox ${id}`, this.logger, starting);
    return sandboxView((await this.sandboxes.findOfWorkspace(p.workspaceId, id))!);
  }

  /** Asks its machine's agent to start a placed sandbox; the row follows (running, or failed with the reason). */
  private async start(command: SandboxCreate, machineId: string): Promise<SandboxView> {
    const id = command.sandboxId;
    let reason: string | undefined;
    try {
      const reply = await this.messaging.request(AGENT_SANDBOX_CREATE, command, {
        tokens: [machineId],
        timeoutMs: command.image === 'host' ? CREATE_TIMEOUT_MS : CREATE_PULL_TIMEOUT_MS,
      });
      if (!reply.running) reason = `machine ${machineId} could not start it: ${reply.reason ?? 'no reason given'}`;
    } catch (e) {
      if (!(e instanceof RequestError)) throw e;
      reason = `machine ${machineId} did not start it: ${e.message}`;
    }
    if (reason) {
      const failed = await this.sandboxes.end(id, 'failed', reason);
      if (failed) await this.ended(failed);
      throw new ServiceUnavailableException(reason);
    }
    const running = await this.sandboxes.markRunning(id);
    if (!running) {
      this.removeOnMachine(machineId, id, 'ended while starting');
      return sandboxView((await this.sandboxes.findOfWorkspace(command.workspaceId, id))!);
    }
    await this.announce(SANDBOX_STARTED, `${id}:started`, {
      sandboxId: id,
      workspaceId: command.workspaceId,
      machineId,
      resources: command.resources,
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

  /**
   * Exposes a port at `<gateway>/sandbox/<id>/<port>/`, reached with the workspace's token; a
   * public one also at `<gateway>/sandbox-public/<token>/`, reached by whoever holds the URL.
   */
  async exposePort(p: Principal, id: string, port: number, isPublic: boolean, gatewayUrl: string): Promise<SandboxPortView> {
    await this.running(p, id);
    const gone = () => new ConflictException(`sandbox ${id} is no longer running`);
    if (!(await this.sandboxes.exposePort(id, port))) throw gone();
    if (!isPublic) return { port, url: `${gatewayUrl}/sandbox/${id}/${port}/`, public: false };
    const publicPorts = await this.sandboxes.makePortPublic(id, port, randomBytes(32).toString('base64url'));
    const token = Object.entries(publicPorts ?? {}).find(([, p]) => p === port)?.[0];
    if (!token) throw gone();
    return { port, url: `${gatewayUrl}${publicPortPath(token)}`, public: true };
  }

  /** The running sandbox and port a public port's token names; 404 for any other token (unknown, or its sandbox ended). */
  async publicPort(token: string): Promise<{ sandbox: Sandbox; port: number }> {
    const sandbox = /^[\w-]{43}$/.test(token) ? await this.sandboxes.findByPublicToken(token) : undefined;
    if (!sandbox || !(await this.sandboxes.touch(sandbox.id))) throw new NotFoundException('no public sandbox port at this URL');
    return { sandbox, port: sandbox.publicPorts[token] };
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
