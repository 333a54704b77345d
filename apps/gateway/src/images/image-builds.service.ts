import { createHash, randomUUID } from 'node:crypto';
import { BadRequestException, Inject, Injectable, Logger, NotFoundException, ServiceUnavailableException } from '@nestjs/common';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { AGENT_IMAGE_BUILD, type ImageBuild, type ImageBuildCommand, type ImageBuildEvent } from '#tern/contracts';
import { invoke, InvokeError, Messaging } from '#tern/messaging';
import { MachinesRepository } from '#tern/persistence';
import { buildSteps, ImageError, parseRegistryRef, pinnedRef, resolveRegistryDigest } from '#tern/runtime';
import { fireAndForget } from '#tern/timing';
import type { Principal } from '../auth/principal.js';
import { CodeStore } from '../code/code-store.js';
import { CodeService, hexOf } from '../code/code.service.js';
import { HeartbeatSnapshotReader } from '../machines/heartbeat-snapshot-reader.js';
import { BuildBroadcast } from './build-broadcast.js';
import { chooseBuilder } from './builder-choice.js';
import type { ImageBuildRequest } from './dto/image-build.request.js';
import { workspaceBuilds } from '../registry-tokens/registry-rights.js';
import { RegistryTokens } from '../registry-tokens/registry-tokens.service.js';
import { ImagePins } from './image-pins.service.js';
import { builderRegistryAccess, ownRegistryAccess } from './registry-users.js';

/** The longest one build may run on its builder. */
const BUILD_TIMEOUT_MS = 60 * 60_000;

/**
 * Silence (keepalives included) after which the builder is taken for gone. Longer than an
 * invoke's: a builder busy unpacking and repacking layers on a loaded machine may send its
 * keepalives late, and a build given up on is minutes lost.
 */
const BUILDER_SILENCE_MS = 60_000;

/** Tern's Debian base (`tern image base`), the default `base:`. */
export const TERN_BASE = 'tern/base:bookworm';

/** What a build is, resolved: its pinned base, its registry tag (the spec's hash) and what the builder binds at /tern/context. */
interface ResolvedBuild {
  build: ImageBuild;
  base: string;
  target: string;
  context?: Uint8Array;
}

/**
 * Builds the images of specs on builder machines. An unchanged spec (same pinned base, same
 * steps, same context) has its image in the registry under `builds/<workspace id>/<name>:<spec hash>` already
 * and is answered from there without running anything; a build of a spec already building on
 * this gateway is followed rather than started again; otherwise the build goes to one ready
 * builder (chooseBuilder) over AGENT_IMAGE_BUILD and its steps and log stream back as they come.
 * The tag is pushed only once every step succeeded, so nothing half-built is ever found.
 */
@Injectable()
export class ImageBuildsService {
  private readonly logger = new Logger('image-builds');
  private readonly inFlight = new Map<string, BuildBroadcast>();

  constructor(
    @Inject(TERN_CONFIG) private readonly config: TernConfig,
    private readonly messaging: Messaging,
    private readonly machines: MachinesRepository,
    private readonly snapshots: HeartbeatSnapshotReader,
    private readonly code: CodeService,
    private readonly store: CodeStore,
    private readonly registryTokens: RegistryTokens,
    private readonly imagePins: ImagePins,
  ) {}

  /** The build's events as NDJSON lines; a 400, 404 or 503 saying what to fix before anything runs. */
  async start(p: Principal, request: ImageBuildRequest): Promise<AsyncIterable<Uint8Array>> {
    const resolved = await this.resolve(p, request);
    const existing = await this.existing(resolved);
    if (existing) return existing.follow();
    const running = this.inFlight.get(resolved.target);
    if (running) return running.follow();

    const push = builderRegistryAccess(this.config, this.registryTokens, resolved);
    if (!push)
      throw new ServiceUnavailableException(
        'the registry takes no gateway tokens and has no push user for builders: set REGISTRY_TOKEN_KEY_FILE, or REGISTRY_PUSH_USERNAME and REGISTRY_PUSH_PASSWORD (npm run up sets the first)',
      );
    const builder = chooseBuilder(resolved.target, await this.readyBuilders());
    if (!builder)
      throw new ServiceUnavailableException(
        'no machine offers building: start an agent with AGENT_BUILDER=true (or tern-agent init --builder); npm run up starts its local agent as one',
      );
    const broadcast = new BuildBroadcast();
    this.inFlight.set(resolved.target, broadcast);
    const command: ImageBuildCommand = {
      build: resolved.build,
      base: resolved.base,
      target: resolved.target,
      push,
      ...(resolved.context ? { context: Buffer.from(resolved.context).toString('base64') } : {}),
    };
    fireAndForget(
      `build ${resolved.target}`,
      this.logger,
      this.run(builder, command, broadcast).finally(() => {
        this.inFlight.delete(resolved.target);
        broadcast.end();
      }),
    );
    return broadcast.follow();
  }

  private async resolve(p: Principal, request: ImageBuildRequest): Promise<ResolvedBuild> {
    const registry = this.config.registry;
    if (!registry)
      throw new ServiceUnavailableException('no image registry: set REGISTRY_URL (npm run up starts a private one) to build images');
    const build = request.image;
    const named = !build.base || build.base === 'tern' ? `${registry.host}/${TERN_BASE}` : build.base;
    let base: string;
    try {
      base = await this.imagePins.resolve(named, p.workspaceId);
    } catch (e) {
      if (!(e instanceof ImageError)) throw e;
      const hint = named.endsWith(TERN_BASE) ? " (push Tern's base once with: sudo tern image base)" : '';
      throw new BadRequestException([`image.base: ${e.message}${hint}`]);
    }
    const context = build.pip_wheels ? await this.context(p, request) : undefined;
    const hash = createHash('sha256')
      .update(JSON.stringify({ base, build, context: context ? request.code : null }))
      .digest('hex')
      .slice(0, 32);
    // Under the workspace's own builds/<workspace id>/: another workspace can neither pull nor deploy it.
    const target = `${registry.host}/${workspaceBuilds(p.workspaceId)}${request.name ?? 'image'}:${hash}`;
    return { build, base, target, ...(context ? { context } : {}) };
  }

  /** The spec's folder, for `pip_wheels`: the workspace's own upload only (another's is 404, as if absent). */
  private async context(p: Principal, request: ImageBuildRequest): Promise<Uint8Array> {
    if (!request.code)
      throw new BadRequestException([
        "image.pip_wheels reads the spec's folder: upload it (PUT /api/v1/code/<digest>, as tern deploy does) and name it in code",
      ]);
    const data = (await this.code.exists(p.workspaceId, request.code)) ? await this.store.get(hexOf(request.code)) : null;
    if (!data) throw new NotFoundException(`code ${request.code} not found: upload the spec's folder first`);
    return data;
  }

  /** How the gateway reads `ref`: Tern's registry with its own pull token or user; another anonymously. */
  private readAccess(ref: string) {
    const { registry, repository } = parseRegistryRef(ref);
    return registry === this.config.registry?.host
      ? ownRegistryAccess(this.config, this.registryTokens, [{ repository, actions: ['pull'] }])
      : [];
  }

  /** The spec's image when the registry has it: a build that ran before, answered without running anything. */
  private async existing(resolved: ResolvedBuild): Promise<BuildBroadcast | undefined> {
    const t0 = Date.now();
    const digest = await resolveRegistryDigest(resolved.target, this.readAccess(resolved.target)).catch(() => undefined);
    if (!digest) return undefined;
    const steps = buildSteps(resolved.build).length;
    const done = new BuildBroadcast();
    const ref = pinnedRef(parseRegistryRef(resolved.target), digest);
    done.publish({ type: 'built', ref, digest, cachedSteps: steps, steps, seconds: (Date.now() - t0) / 1000, reused: true });
    done.end();
    return done;
  }

  /** Ready machines whose agent said, in its last heartbeat, that it builds. */
  private async readyBuilders(): Promise<string[]> {
    const ready = await this.machines.list({ state: 'ready' });
    const beats = await this.snapshots.getMany(ready.map((m) => m.id));
    // A quarantined machine builds nothing either (see docs/architecture.md › Hardware).
    return ready.filter((m) => beats.get(m.id)?.builder && m.verification !== 'quarantined').map((m) => m.id);
  }

  /** Sends the build to its builder and relays its events; always ends with `built` or `failed`. */
  private async run(machineId: string, command: ImageBuildCommand, broadcast: BuildBroadcast): Promise<void> {
    const buildId = randomUUID().replace(/-/g, '');
    this.logger.log({ machineId, buildId, target: command.target }, `building ${command.target} on ${machineId}`);
    broadcast.publish({ type: 'log', line: `building on machine ${machineId}` });
    let ended = false;
    const relay = (event: ImageBuildEvent) => {
      ended ||= event.type === 'built' || event.type === 'failed';
      broadcast.publish(event);
    };
    try {
      const response = await invoke(
        this.messaging,
        { machineId, containerId: buildId },
        { requestId: buildId, deploymentId: buildId, method: 'POST', path: '/build', headers: {}, timeoutMs: BUILD_TIMEOUT_MS },
        Buffer.from(JSON.stringify(command)),
        { contract: AGENT_IMAGE_BUILD, idleTimeoutMs: BUILDER_SILENCE_MS },
      );
      let partial = '';
      for await (const chunk of response.body) {
        const lines = (partial + Buffer.from(chunk).toString('utf8')).split('\n');
        partial = lines.pop() ?? '';
        for (const line of lines.filter(Boolean)) relay(parseEvent(line, response.status));
      }
      if (partial) relay(parseEvent(partial, response.status));
      if (!ended) relay({ type: 'failed', message: `builder ${machineId} ended the build without a result` });
    } catch (e) {
      if (!(e instanceof InvokeError)) throw e;
      relay({ type: 'failed', message: `builder ${machineId}: ${e.message}` });
    }
  }
}

/** One line of the builder's answer; an error answer (not NDJSON) becomes the build's failure. */
function parseEvent(line: string, status: number): ImageBuildEvent {
  if (status !== 200) return { type: 'failed', message: `the builder answered ${status}: ${line}` };
  try {
    return JSON.parse(line) as ImageBuildEvent;
  } catch {
    return { type: 'log', line };
  }
}
