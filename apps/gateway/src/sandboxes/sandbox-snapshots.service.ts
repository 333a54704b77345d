import { BadRequestException, ConflictException, Inject, Injectable, ServiceUnavailableException } from '@nestjs/common';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { AGENT_SANDBOX_SNAPSHOT, type SnapshotRequest, type SnapshotView } from '#tern/contracts';
import { Messaging, RequestError } from '#tern/messaging';
import { parseRegistryRef, pinnedRef } from '#tern/runtime';
import type { Principal } from '../auth/principal.js';
import { ImagePins } from '../images/image-pins.service.js';
import { TERN_BASE } from '../images/image-builds.service.js';
import { builderRegistryAccess } from '../images/registry-users.js';
import { RegistryTokens } from '../registry-tokens/registry-tokens.service.js';
import { workspaceBuilds } from '../registry-tokens/registry-rights.js';
import { SandboxesService } from './sandboxes.service.js';

/**
 * How long a snapshot may take on its machine: pull the base's manifest and layers (cached in the
 * registry, copied once), pack /workspace, push one layer. The request answers within it.
 */
export const SNAPSHOT_TIMEOUT_MS = 300_000;

/**
 * A sandbox's filesystem as an image: its /workspace, one layer on the image it runs (Tern's base
 * for a `host` sandbox, whose /usr is the machine's and cannot be an image), pushed by its own
 * machine to `builds/<workspace id>/snapshots/<name>:<tag>` with a registry token for that target
 * only, as a builder pushes a build. The answer is pinned: a new sandbox or a deployment runs it.
 */
@Injectable()
export class SandboxSnapshots {
  constructor(
    @Inject(TERN_CONFIG) private readonly config: TernConfig,
    private readonly sandboxes: SandboxesService,
    private readonly messaging: Messaging,
    private readonly imagePins: ImagePins,
    private readonly registryTokens: RegistryTokens,
  ) {}

  async snapshot(p: Principal, id: string, request: SnapshotRequest): Promise<SnapshotView> {
    const sandbox = await this.sandboxes.running(p, id);
    const registry = this.config.registry;
    if (!registry)
      throw new ConflictException('no image registry to push the snapshot to: set REGISTRY_URL (npm run up starts a private one)');
    const image = typeof sandbox.spec.image === 'string' ? sandbox.spec.image : 'host';
    const base = image === 'host' ? await this.ternBase(p, registry.host) : image;
    const name = request.name ?? 'sandbox';
    const tag = request.tag ?? `${id}-${Date.now()}`;
    const target = `${registry.host}/${workspaceBuilds(p.workspaceId)}snapshots/${name}:${tag}`;
    const access = builderRegistryAccess(this.config, this.registryTokens, { target, base });
    if (!access)
      throw new ConflictException(
        "the registry takes neither the gateway's tokens nor a push user (REGISTRY_PUSH_*): nothing may push a snapshot",
      );
    let reply;
    try {
      reply = await this.messaging.request(
        AGENT_SANDBOX_SNAPSHOT,
        { sandboxId: id, image: base, target, registry: access },
        { tokens: [sandbox.machineId!], timeoutMs: SNAPSHOT_TIMEOUT_MS },
      );
    } catch (e) {
      if (!(e instanceof RequestError)) throw e;
      throw new ServiceUnavailableException(`machine ${sandbox.machineId} did not snapshot sandbox ${id}: ${e.message}`);
    }
    if (!reply.digest)
      throw new ServiceUnavailableException(
        `machine ${sandbox.machineId} could not snapshot sandbox ${id}: ${reply.reason ?? 'no reason given'}`,
      );
    return { image: pinnedRef(parseRegistryRef(target), reply.digest), digest: reply.digest, tag: `${name}:${tag}` };
  }

  /** Tern's base, pinned: a `host` sandbox's snapshot is laid on it, or 409 saying how to push it. */
  private async ternBase(p: Principal, host: string): Promise<string> {
    const ref = `${host}/${TERN_BASE}`;
    try {
      return await this.imagePins.pin(ref, p.workspaceId);
    } catch (e) {
      if (!(e instanceof BadRequestException)) throw e;
      throw new ConflictException(
        `a host sandbox's snapshot is its /workspace on Tern's base image ${ref}, which the registry does not hold: push it once with sudo tern image base (or create the sandbox from a registry image)`,
      );
    }
  }
}
