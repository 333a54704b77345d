import { Inject, Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import { cp, lstat, rm } from 'node:fs/promises';
import { join } from 'node:path';
import {
  SANDBOX_CALL,
  SANDBOX_FILE_MAX_BYTES,
  SANDBOX_WORKDIR,
  type SandboxCreate,
  type SandboxCreateReply,
  type SandboxRemove,
  type SandboxRemoveReply,
  type SandboxSnapshot,
  type SandboxSnapshotReply,
  type TunnelOpen,
  type TunnelOpenReply,
} from '#tern/contracts';
import { Messaging, serveInvoke } from '#tern/messaging';
import { type ManagedContainer, RuncRuntime, snapshotImage } from '#tern/runtime';
import { AGENT_CONTEXT, type AgentContext } from '../agent-context.js';
import { allocateGpus, gpuKey, RUNTIME_ID } from '../containers/container-spec.js';
import { GpuHolders } from '../containers/gpu-holders.js';
import { CONTAINER_RUNTIME, type RuntimeHandle } from '../containers/container-runtime.provider.js';
import { InvokeRoutes } from '../invoke/invoke-routes.js';
import { HostedSandbox } from './hosted-sandbox.js';
import { sandboxFromLabels, type SandboxRecord } from './sandbox-labels.js';
import { sandboxRouter } from './sandbox-router.js';
import { sandboxVolumeName, toSandboxSpec } from './sandbox-spec.js';
import { openSandboxTunnel } from './sandbox-tunnels.js';
import { VolumeMounts } from '../volumes/volume-mounts.js';

/** Room beside a file's bytes in a response (the stream's framing). */
const RESPONSE_ROOM = 1024 * 1024;

/**
 * This machine's sandboxes: a container per sandbox whose first process only keeps it alive
 * (`sleep infinity`), a writable /workspace (the volume `sandboxes/<id>`, removed with it), and
 * the sandbox API served on `tern.agent.<machineId>.sandbox.call.<sandboxId>.v1`. Containers
 * survive the agent; a new one adopts them (ContainersService's reconcile hands them over).
 */
@Injectable()
export class SandboxesService implements OnApplicationShutdown {
  private readonly logger = new Logger('sandboxes');
  private readonly hosted = new Map<string, HostedSandbox>();
  private readonly starting = new Map<string, Promise<SandboxCreateReply>>();
  /** The GPUs (`vendor:index`) each sandbox starting or running here holds. */
  private readonly gpus = new Map<string, string[]>();

  constructor(
    private readonly messaging: Messaging,
    @Inject(CONTAINER_RUNTIME) private readonly handle: RuntimeHandle,
    @Inject(AGENT_CONTEXT) private readonly ctx: AgentContext,
    private readonly invokes: InvokeRoutes,
    private readonly volumes: VolumeMounts,
    private readonly gpuHolders: GpuHolders,
  ) {
    gpuHolders.add(() => [...this.gpus.values()].flat());
  }

  private get machineId(): string {
    return this.ctx.registration.machineId;
  }

  private runtime(): RuncRuntime | string {
    const runtime = this.handle.runtime;
    if (!runtime) return `no container runtime on this machine: ${this.handle.problem}`;
    if (!(runtime instanceof RuncRuntime)) return `sandboxes need the runc runtime (this machine runs ${runtime.kind})`;
    return runtime;
  }

  /** Whether a container found in the runtime is one of this machine's sandboxes (reconcile adopts those). */
  isSandbox(c: Pick<ManagedContainer, 'id' | 'labels'>): boolean {
    return !!sandboxFromLabels(c.id, c.labels, this.machineId);
  }

  runningIds(): string[] {
    return [...this.hosted.keys()];
  }

  create(cmd: SandboxCreate): Promise<SandboxCreateReply> {
    if (this.hosted.has(cmd.sandboxId)) return Promise.resolve({ running: true });
    const pending =
      this.starting.get(cmd.sandboxId) ??
      this.start(cmd)
        .then(
          (reply) => {
            if (!reply.running) this.gpus.delete(cmd.sandboxId);
            return reply;
          },
          (e: unknown) => {
            this.gpus.delete(cmd.sandboxId);
            throw e;
          },
        )
        .finally(() => this.starting.delete(cmd.sandboxId));
    this.starting.set(cmd.sandboxId, pending);
    return pending;
  }

  private async start(cmd: SandboxCreate): Promise<SandboxCreateReply> {
    const runtime = this.runtime();
    if (typeof runtime === 'string') return { running: false, reason: runtime };
    if (!RUNTIME_ID.test(cmd.sandboxId))
      return { running: false, reason: `sandbox id "${cmd.sandboxId}" must start with a letter or digit` };
    // Claimed before the first await, so that a container's or another sandbox's start cannot take the same GPUs.
    const gpus = allocateGpus(this.ctx.state.gpus, this.gpuHolders.busy(), cmd.resources.gpuCount, cmd.resources.gpuType);
    if (!gpus.ok) return { running: false, reason: gpus.reason };
    const record: SandboxRecord = {
      sandboxId: cmd.sandboxId,
      workspaceId: cmd.workspaceId,
      workdir: cmd.workdir,
      gpus: gpus.gpus.map(gpuKey),
    };
    this.gpus.set(cmd.sandboxId, record.gpus);
    const network = this.handle.isolation?.network ?? 'host';
    const mounts = cmd.volumes ?? [];
    let volumeDirs: Record<string, string>;
    try {
      volumeDirs = await this.volumes.mount({ containerId: cmd.sandboxId, workspaceId: cmd.workspaceId, volumes: mounts });
    } catch (e) {
      await this.releaseVolumes(cmd.sandboxId);
      return { running: false, reason: `its volumes could not be mounted: ${(e as Error).message}` };
    }
    let workspace: string | undefined;
    try {
      workspace = await this.workspaceFromImage(runtime, cmd);
    } catch (e) {
      await this.removeVolume(cmd.sandboxId);
      await this.releaseVolumes(cmd.sandboxId);
      return { running: false, reason: `image ${cmd.image}: ${(e as Error).message}` };
    }
    const spec = toSandboxSpec(cmd, record, this.machineId, gpus.gpus, { workspace, volumes: volumeDirs }, network);
    let address: string | undefined;
    try {
      address = (await runtime.start(spec)).address;
    } catch (e) {
      this.logger.warn({ sandboxId: cmd.sandboxId }, `sandbox ${cmd.sandboxId} did not start: ${(e as Error).message}`);
      await this.removeVolume(cmd.sandboxId);
      await this.releaseVolumes(cmd.sandboxId);
      return { running: false, reason: (e as Error).message };
    }
    this.serve(this.sandboxFor(record, runtime, network === 'private' ? address : undefined));
    this.logger.log({ sandboxId: cmd.sandboxId, workspaceId: cmd.workspaceId }, `sandbox ${cmd.sandboxId} running`);
    return { running: true };
  }

  /**
   * A registry image's /workspace (a snapshot's, an image made for sandboxes) copied into the
   * sandbox's writable /workspace: the directory, when the image has one, else undefined. The
   * image is pulled here (the start then finds it prepared). Symlinks are copied as links, never
   * followed: they resolve inside the container.
   */
  private async workspaceFromImage(runtime: RuncRuntime, cmd: SandboxCreate): Promise<string | undefined> {
    if (cmd.image === 'host') return undefined;
    const from = join((await runtime.image(cmd.image)).rootfs, SANDBOX_WORKDIR);
    if (!(await lstat(from).catch(() => undefined))?.isDirectory()) return undefined;
    const to = this.volumeDir(cmd.sandboxId);
    await cp(from, to, { recursive: true, verbatimSymlinks: true, preserveTimestamps: true });
    return to;
  }

  /** A sandbox container found after a restart: served again, with the processes the former agent started. */
  async adopt(c: Pick<ManagedContainer, 'id' | 'labels' | 'address'>): Promise<void> {
    const runtime = this.runtime();
    const record = sandboxFromLabels(c.id, c.labels, this.machineId);
    if (typeof runtime === 'string' || !record) return;
    this.gpus.set(record.sandboxId, record.gpus);
    const sandbox = this.sandboxFor(record, runtime, this.handle.isolation?.network === 'private' ? c.address : undefined);
    await sandbox.adoptProcesses();
    this.serve(sandbox);
    this.logger.log({ sandboxId: c.id, processes: sandbox.processes().length }, `adopted sandbox ${c.id} after a restart`);
  }

  async remove(cmd: SandboxRemove): Promise<SandboxRemoveReply> {
    await this.starting.get(cmd.sandboxId);
    const sandbox = this.hosted.get(cmd.sandboxId);
    this.hosted.delete(cmd.sandboxId);
    this.gpus.delete(cmd.sandboxId);
    sandbox?.sub?.unsubscribe();
    await sandbox?.killAll();
    const runtime = this.runtime();
    if (typeof runtime !== 'string') await runtime.remove(cmd.sandboxId);
    await this.removeVolume(cmd.sandboxId);
    await this.releaseVolumes(cmd.sandboxId);
    this.logger.log({ sandboxId: cmd.sandboxId }, `sandbox ${cmd.sandboxId} removed (${cmd.reason})`);
    return { removed: true };
  }

  /**
   * Pushes the sandbox's /workspace, as one layer on `cmd.image`, to `cmd.target` with the
   * registry token the gateway signed for this snapshot. Its processes keep running: a file
   * written during the copy may be caught half-written (see docs/architecture.md, Sandboxes).
   */
  async snapshot(cmd: SandboxSnapshot): Promise<SandboxSnapshotReply> {
    const runtime = this.runtime();
    if (typeof runtime === 'string') return { reason: runtime };
    if (!this.hosted.has(cmd.sandboxId)) return { reason: `sandbox ${cmd.sandboxId} does not run on this machine` };
    try {
      const digest = await snapshotImage({
        base: cmd.image,
        target: cmd.target,
        access: [cmd.registry],
        source: this.volumeDir(cmd.sandboxId),
        path: SANDBOX_WORKDIR,
        workDir: join(this.ctx.settings.stateDir, 'snapshots'),
        ...(await runtime.userNamespace().then((userNamespace) => (userNamespace ? { userNamespace } : {}))),
        createdBy: `tern sandbox snapshot ${cmd.sandboxId}`,
      });
      this.logger.log({ sandboxId: cmd.sandboxId }, `sandbox ${cmd.sandboxId} snapshot pushed to ${cmd.target}@${digest}`);
      return { digest };
    } catch (e) {
      this.logger.warn({ sandboxId: cmd.sandboxId }, `sandbox ${cmd.sandboxId} snapshot failed: ${(e as Error).message}`);
      return { reason: (e as Error).message };
    }
  }

  openTunnel(cmd: TunnelOpen): Promise<TunnelOpenReply> {
    const sandbox = this.hosted.get(cmd.sandboxId);
    if (!sandbox) return Promise.resolve({ opened: false, reason: `sandbox ${cmd.sandboxId} does not run on this machine` });
    return openSandboxTunnel(this.messaging, this.machineId, sandbox, cmd);
  }

  private sandboxFor(record: SandboxRecord, runtime: RuncRuntime, address: string | undefined): HostedSandbox {
    return new HostedSandbox(record, runtime, join(this.ctx.settings.stateDir, 'sandboxes', record.sandboxId), address);
  }

  private serve(sandbox: HostedSandbox): void {
    const record = sandbox.record;
    sandbox.sub = serveInvoke(
      this.messaging,
      { machineId: this.machineId, containerId: record.sandboxId },
      sandboxRouter(sandbox),
      this.invokes.fetchBody,
      SANDBOX_CALL,
      SANDBOX_FILE_MAX_BYTES + RESPONSE_ROOM,
    );
    this.hosted.set(record.sandboxId, sandbox);
  }

  /** Its writable /workspace on this machine (the runtime's volume `sandboxes/<id>`). */
  private volumeDir(sandboxId: string): string {
    return join(this.ctx.settings.stateDir, 'volumes', sandboxVolumeName(sandboxId));
  }

  private async removeVolume(sandboxId: string): Promise<void> {
    await rm(this.volumeDir(sandboxId), { recursive: true, force: true });
  }

  /** Commits its read-write volumes (what changed since they were mounted) and removes its copies; logged, never thrown. */
  private async releaseVolumes(sandboxId: string): Promise<void> {
    try {
      for (const [volume, report] of Object.entries(await this.volumes.release(sandboxId)))
        this.logger.log(
          { sandboxId, volume },
          `volume ${volume} of sandbox ${sandboxId}: ${report.outcome}${report.reason ? ` (${report.reason})` : ''}`,
        );
    } catch (e) {
      this.logger.error({ sandboxId }, `volumes of sandbox ${sandboxId} not committed: ${(e as Error).message}`);
    }
  }

  /** The containers and their processes stay (as containers do): the next agent adopts them. */
  onApplicationShutdown(): void {
    for (const s of this.hosted.values()) {
      s.sub?.unsubscribe();
      s.close();
    }
    this.hosted.clear();
  }
}
