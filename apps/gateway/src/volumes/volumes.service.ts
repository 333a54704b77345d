import {
  BadRequestException,
  ConflictException,
  Inject,
  Injectable,
  Logger,
  NotFoundException,
  PayloadTooLargeException,
  UnsupportedMediaTypeException,
} from '@nestjs/common';
import { Readable } from 'node:stream';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import {
  AGENT_VOLUME_COMMIT,
  VOLUME_CHUNK_BYTES,
  VOLUME_NAME,
  VOLUME_NAME_RULE,
  type VolumeCommitAnswer,
  type VolumeCommitResult,
  type VolumeManifest,
} from '#tern/contracts';
import { Messaging, RequestError } from '#tern/messaging';
import { type VolumeFileRow, type VolumeFileWrite, VolumesRepository, type VolumeSummary, type VolumeWriter } from '#tern/persistence';
import { BlobStoreError, chunksOf, entriesBelow, sha256Hex, volumePath } from '#tern/volumes';
import { VolumeChunkStore } from './volume-chunk-store.js';

/** How long a machine may take to upload a container's changes and commit them (large files take a while). */
const MOUNT_COMMIT_TIMEOUT_MS = 600_000;

/** How long an unheld chunk stays before the sweeper removes it: an upload or commit in progress may be about to hold it. */
const SWEEP_IDLE_SECONDS = 3600;

/** A volume as the API shows it: its summary without the internal id. */
export type VolumeView = Omit<VolumeSummary, 'id'>;

export interface VolumeFileView {
  path: string;
  size: number;
  mode: string;
  mtime: Date;
}

/** One running container's commit of a volume, as `POST /api/v1/volumes/<name>/commit` reports it. */
export type ContainerCommitView = { containerId: string } & VolumeCommitAnswer;

/** A workspace's use of its volume quota. */
export interface VolumeUsage {
  bytes: number;
  files: number;
  quotaBytes: number;
  quotaFiles: number;
}

/** The volumes of the caller's workspace: another workspace's volume of the same name is not found. */
@Injectable()
export class VolumesService {
  private readonly logger = new Logger('volumes');
  /** The version manifest being published per volume, which the next one waits for. */
  private readonly publishing = new Map<string, Promise<void>>();

  constructor(
    private readonly volumes: VolumesRepository,
    private readonly chunks: VolumeChunkStore,
    private readonly messaging: Messaging,
    @Inject(TERN_CONFIG) private readonly config: TernConfig,
  ) {}

  async create(workspaceId: string, name: string): Promise<VolumeView> {
    if (!VOLUME_NAME.test(name)) throw new BadRequestException([`volume name "${name}" is not a name: use ${VOLUME_NAME_RULE}`]);
    const created = await this.volumes.create(workspaceId, name);
    if (!created) throw new ConflictException(`volume ${name} exists already in this workspace`);
    return viewOf(created);
  }

  async list(workspaceId: string): Promise<{ volumes: VolumeView[]; usage: VolumeUsage }> {
    const volumes = await this.volumes.list(workspaceId);
    return { volumes: volumes.map(viewOf), usage: await this.usage(workspaceId) };
  }

  async get(workspaceId: string, name: string): Promise<VolumeView> {
    return viewOf(await this.find(workspaceId, name));
  }

  /** The files and directories right below `rawPath` (the root when empty). */
  async ls(workspaceId: string, name: string, rawPath = '') {
    const volume = await this.find(workspaceId, name);
    const path = pathOf(rawPath, true);
    const files = await this.volumes.files(volume.id, path);
    const exact = files.find((f) => f.path === path);
    if (exact) return { volume: name, path, directories: [], files: [fileView(exact)] };
    if (path && !files.length) throw new NotFoundException(`volume ${name} has nothing at ${path}`);
    const below = entriesBelow(files, path);
    return { volume: name, path, directories: below.directories, files: below.files.map(fileView) };
  }

  /**
   * Streams the body into the volume at `rawPath` chunk by chunk (one chunk in memory at a
   * time), storing only chunks the workspace lacks, then commits the file as the next version.
   */
  async put(
    workspaceId: string,
    name: string,
    rawPath: string,
    body: unknown,
    headers: { contentType?: string; contentLength?: string; mode?: string },
  ): Promise<{ path: string; size: number; chunks: number; version: number }> {
    const volume = await this.find(workspaceId, name);
    const path = pathOf(rawPath);
    if (!(body instanceof Readable)) {
      throw new UnsupportedMediaTypeException(
        `send the file as application/octet-stream (got ${headers.contentType ?? 'no content type'})`,
      );
    }
    const mode = modeOf(headers.mode);
    const usage = await this.usage(workspaceId);
    const declared = Number(headers.contentLength);
    if (Number.isFinite(declared)) this.assertRoom(usage, declared, 0);
    const existing = await this.volumes.files(volume.id, path);
    if (!existing.some((f) => f.path === path)) this.assertRoom(usage, 0, 1);
    if (existing.some((f) => f.path !== path))
      throw new ConflictException(`${path} is a directory of volume ${name}: rm it first or choose another path`);
    const digests: string[] = [];
    const stored: string[] = [];
    let size = 0;
    let added = 0;
    try {
      // Not destroyed on a throw: the request intake drains the rest so the client reads the 413.
      for await (const chunk of chunksOf(body.iterator({ destroyOnReturn: false }), VOLUME_CHUNK_BYTES)) {
        const chunkStored = await this.storeChunk(workspaceId, volume.id, chunk, () => this.assertRoom(usage, added + chunk.length, 0));
        if (chunkStored.added) stored.push(chunkStored.hex);
        added += chunkStored.added;
        size += chunk.length;
        digests.push(chunkStored.hex);
      }
    } catch (e) {
      // What a refused or broken upload stored counts against nobody's quota.
      this.sweepNow(workspaceId, stored);
      throw e;
    }
    const committed = await this.volumes.commit(volume.id, undefined, [{ path, size, mode, mtime: new Date(), chunks: digests }], []);
    await this.publishAfterCommit(workspaceId, volume.id);
    return { path, size, chunks: digests.length, version: committed.version };
  }

  /** The file's bytes as a stream that reads one chunk from the store at a time. */
  async download(workspaceId: string, name: string, rawPath: string): Promise<{ size: number; stream: Readable }> {
    const volume = await this.find(workspaceId, name);
    const path = pathOf(rawPath);
    const file = (await this.volumes.files(volume.id, path)).find((f) => f.path === path);
    if (!file) throw new NotFoundException(`volume ${name} has no file ${path}`);
    await this.ensureInRegistry(workspaceId, volume.id);
    const chunks = this.chunks;
    async function* bytes() {
      for (const hex of file!.chunks) {
        const chunk = await chunks.get(workspaceId, volume.id, hex);
        if (!chunk) throw new Error(`chunk ${hex} of ${name}/${path} is missing from the store`);
        yield chunk;
      }
    }
    // Bytes mode: the stream holds one chunk ahead, not the 16 an object-mode stream would.
    return { size: file.size, stream: Readable.from(bytes(), { objectMode: false }) };
  }

  /** Removes a file, or a directory with everything below it. */
  async rm(workspaceId: string, name: string, rawPath: string): Promise<VolumeCommitResult> {
    const volume = await this.find(workspaceId, name);
    const path = pathOf(rawPath);
    const files = await this.volumes.files(volume.id, path);
    if (!files.length) throw new NotFoundException(`volume ${name} has nothing at ${path}`);
    const result = await this.volumes.commit(
      volume.id,
      undefined,
      [],
      files.map((f) => f.path),
    );
    await this.publishAfterCommit(workspaceId, volume.id);
    this.sweepLater(workspaceId);
    return result;
  }

  async delete(workspaceId: string, name: string): Promise<void> {
    const volume = await this.find(workspaceId, name);
    await this.volumes.remove(volume.id);
    await this.chunks
      .unpublish(workspaceId, volume.id)
      .catch((e: unknown) => this.logger.warn(`the registry kept volume ${name}'s version manifests: ${String(e)}`));
    this.sweepLater(workspaceId);
  }

  /**
   * Commits now what every container and sandbox of the workspace that mounts the volume read-write has
   * written (each from its own base, as its stop would): each machine uploads and commits its
   * container's changes and answers with the commit report.
   */
  async commitMounts(workspaceId: string, name: string): Promise<{ volume: string; version: number; containers: ContainerCommitView[] }> {
    const volume = await this.find(workspaceId, name);
    const containers: ContainerCommitView[] = [];
    // One at a time: each commit's report then names what the one before it overwrote.
    for (const writer of await this.volumes.writers(volume.id)) {
      containers.push({ containerId: writer.containerId, ...(await this.commitOnMachine(writer, name)) });
    }
    return { volume: name, version: (await this.find(workspaceId, name)).version, containers };
  }

  private async commitOnMachine(writer: VolumeWriter, volume: string): Promise<VolumeCommitAnswer> {
    try {
      return await this.messaging.request(
        AGENT_VOLUME_COMMIT,
        { containerId: writer.containerId, volume },
        { tokens: [writer.machineId], timeoutMs: MOUNT_COMMIT_TIMEOUT_MS },
      );
    } catch (e) {
      if (!(e instanceof RequestError)) throw e;
      // The machine's id stays out of the answer: a workspace does not learn a shared pool's machines.
      return { outcome: 'failed', overwritten: [], skipped: [], reason: `the container's machine did not answer: ${e.message}` };
    }
  }

  /** What a machine mounts; with the registry, its chunks are there first (a volume of the object-store layout moves over now). */
  async manifest(workspaceId: string, volumeId: string, name: string): Promise<VolumeManifest> {
    await this.ensureInRegistry(workspaceId, volumeId);
    const { version, files } = await this.volumes.manifest(volumeId);
    return {
      volume: name,
      version,
      files: files.map((f) => ({ path: f.path, size: f.size, mode: f.mode, mtime: new Date(f.mtime).toISOString(), chunks: f.chunks })),
      ...(this.chunks.inRegistry ? { store: 'registry' as const } : {}),
    };
  }

  /**
   * Stores one chunk for the volume unless its store holds it (then only touches it, so the
   * sweeper leaves it); `check` runs before a chunk new to the workspace is stored (the quota).
   * A chunk the workspace holds in another volume's repository is linked into this one's too,
   * as it counts once against the quota.
   */
  async storeChunk(
    workspaceId: string,
    volumeId: string,
    chunk: Uint8Array,
    check: () => void | Promise<void> = () => undefined,
  ): Promise<{ hex: string; added: number }> {
    const hex = sha256Hex(chunk);
    const recorded = await this.volumes.touchChunk(workspaceId, hex);
    if (recorded && (!this.chunks.inRegistry || (await this.chunks.holds(workspaceId, volumeId, hex)))) return { hex, added: 0 };
    if (!recorded) await check();
    await this.chunks.put(workspaceId, volumeId, hex, chunk);
    if (recorded) return { hex, added: 0 };
    await this.volumes.recordChunk(workspaceId, hex, chunk.length);
    return { hex, added: chunk.length };
  }

  /**
   * Registry only: the chunks a machine pushed to the volume's repository for a commit. Each
   * must be there (the registry checked its digest when it took it); those new to the workspace
   * count against its quota at the size the registry reports.
   */
  private async acceptPushed(workspaceId: string, volumeId: string, digests: readonly string[]): Promise<void> {
    const held = await this.chunks.sizes(workspaceId, volumeId, digests);
    const missing = digests.find((hex) => !held.has(hex));
    if (missing)
      throw new BadRequestException([
        `chunk ${missing} is not in the volume's repository of the registry: push it (with the token of …/grant) before the commit`,
      ]);
    const recorded = await this.volumes.chunkSizes(workspaceId, [...held.keys()]);
    const fresh = [...held].filter(([hex]) => !recorded.has(hex));
    this.assertRoom(
      await this.usage(workspaceId),
      fresh.reduce((n, [, size]) => n + size, 0),
      0,
    );
    for (const [hex, size] of fresh) await this.volumes.recordChunk(workspaceId, hex, size);
  }

  /** The quota check for a new chunk a machine commits. */
  async roomFor(workspaceId: string, bytes: number, files: number): Promise<void> {
    this.assertRoom(await this.usage(workspaceId), bytes, files);
  }

  /**
   * A commit from a machine: sizes come from the chunks the workspace stores (not the machine's
   * word), and every chunk must be stored already (uploaded before the commit).
   */
  async commit(
    volumeId: string,
    workspaceId: string,
    baseVersion: number,
    writes: { path: string; mode: number; mtime: string; chunks: string[] }[],
    removals: string[],
  ): Promise<VolumeCommitResult> {
    const digests = writes.flatMap((w) => w.chunks);
    if (this.chunks.inRegistry) await this.acceptPushed(workspaceId, volumeId, digests);
    const sizes = await this.volumes.chunkSizes(workspaceId, digests);
    const files: VolumeFileWrite[] = writes.map((w) => {
      const missing = w.chunks.find((hex) => !sizes.has(hex));
      if (missing) throw new BadRequestException([`chunk ${missing} of ${w.path} is not stored: upload it before the commit`]);
      return {
        path: pathOf(w.path),
        mode: w.mode,
        mtime: new Date(w.mtime),
        chunks: w.chunks,
        size: w.chunks.reduce((n, hex) => n + sizes.get(hex)!, 0),
      };
    });
    const current = new Set((await this.volumes.files(volumeId)).map((f) => f.path));
    this.assertRoom(await this.usage(workspaceId), 0, files.filter((f) => !current.has(f.path)).length - removals.length);
    const result = await this.volumes.commit(
      volumeId,
      baseVersion,
      files,
      removals.map((r) => pathOf(r)),
    );
    await this.publishAfterCommit(workspaceId, volumeId);
    if (removals.length) this.sweepLater(workspaceId);
    return result;
  }

  /**
   * The volume's current version as a manifest in the registry (nothing for the object store),
   * one publication per volume at a time, each reading the state it publishes. Rejects with why
   * it failed; the chain goes on.
   */
  private publish(workspaceId: string, volumeId: string): Promise<void> {
    if (!this.chunks.inRegistry) return Promise.resolve();
    const next = (this.publishing.get(volumeId) ?? Promise.resolve()).then(() => this.publishNow(workspaceId, volumeId));
    const forget = () => {
      if (this.publishing.get(volumeId) === settled) this.publishing.delete(volumeId);
    };
    const settled = next.then(forget, forget);
    this.publishing.set(volumeId, settled);
    return next;
  }

  /** After a put, rm or commit: the version is committed already, so a failure is logged, and the next publication catches up. */
  private async publishAfterCommit(workspaceId: string, volumeId: string): Promise<void> {
    await this.publish(workspaceId, volumeId).catch((e: unknown) =>
      this.logger.warn(`publishing volume ${volumeId}'s version manifest failed: ${String(e)}`),
    );
  }

  /**
   * Tags the volume's current version. The registry refuses a manifest naming a blob the
   * repository lacks: chunks stored before the registry held volumes (the object-store layout)
   * are then copied over, checked against their digests, and the manifest tagged again.
   */
  private async publishNow(workspaceId: string, volumeId: string): Promise<void> {
    const { version, files } = await this.volumes.manifest(volumeId);
    const sizes = await this.volumes.chunkSizes(
      workspaceId,
      files.flatMap((f) => f.chunks),
    );
    try {
      await this.chunks.publish(workspaceId, volumeId, version, sizes);
    } catch (e) {
      if (!(e instanceof BlobStoreError) || e.status !== 400) throw e;
      await this.chunks.adopt(workspaceId, volumeId, [...sizes.keys()]);
      await this.chunks.publish(workspaceId, volumeId, version, sizes);
    }
  }

  /**
   * With the registry: the volume's current version is tagged there, so every chunk it holds
   * is (a version written before the registry held volumes is moved over first). One request
   * when it is.
   */
  private async ensureInRegistry(workspaceId: string, volumeId: string): Promise<void> {
    if (!this.chunks.inRegistry) return;
    const { version } = await this.volumes.manifest(volumeId);
    if (await this.chunks.published(workspaceId, volumeId, version)) return;
    await this.publish(workspaceId, volumeId);
  }

  async usage(workspaceId: string): Promise<VolumeUsage> {
    const used = await this.volumes.usage(workspaceId);
    return { ...used, quotaBytes: this.config.volumes.quotaBytes, quotaFiles: this.config.volumes.quotaFiles };
  }

  private assertRoom(usage: VolumeUsage, bytes: number, files: number): void {
    if (usage.bytes + bytes > usage.quotaBytes) {
      throw new PayloadTooLargeException(
        `the workspace's volumes would store ${usage.bytes + bytes} bytes, over its quota of ${usage.quotaBytes} (VOLUME_QUOTA_BYTES): rm files or delete volumes first`,
      );
    }
    if (files > 0 && usage.files + files > usage.quotaFiles) {
      throw new PayloadTooLargeException(
        `the workspace's volumes would hold ${usage.files + files} files, over its quota of ${usage.quotaFiles} (VOLUME_QUOTA_FILES): rm files or delete volumes first`,
      );
    }
  }

  private async find(workspaceId: string, name: string): Promise<VolumeSummary> {
    const volume = VOLUME_NAME.test(name) ? await this.volumes.find(workspaceId, name) : undefined;
    if (!volume) throw new NotFoundException(`volume ${name} not found in this workspace (tern volume list shows yours)`);
    return volume;
  }

  /** Removes the objects of chunks nothing holds any more (after SWEEP_IDLE_SECONDS untouched). */
  private sweepLater(workspaceId: string): void {
    this.sweep(workspaceId, SWEEP_IDLE_SECONDS);
  }

  /** Removes at once the given chunks that no file holds. */
  private sweepNow(workspaceId: string, digests: string[]): void {
    if (digests.length) this.sweep(workspaceId, 0, digests);
  }

  private sweep(workspaceId: string, idleSeconds: number, only?: string[]): void {
    const sweep = async () => {
      for (const hex of await this.volumes.forgetUnheldChunks(workspaceId, idleSeconds, only)) await this.chunks.delete(workspaceId, hex);
    };
    sweep().catch((err: unknown) => this.logger.warn(`sweeping the volume chunks of workspace ${workspaceId} failed: ${String(err)}`));
  }
}

function pathOf(raw: string, rootAllowed = false): string {
  const checked = volumePath(raw, { rootAllowed });
  if ('problem' in checked) throw new BadRequestException([checked.problem]);
  return checked.path;
}

function modeOf(raw: string | undefined): number {
  if (raw === undefined) return 0o644;
  if (!/^[0-7]{3,4}$/.test(raw)) throw new BadRequestException([`mode "${raw}" must be octal permission bits such as 644 or 0755`]);
  return parseInt(raw, 8);
}

function viewOf({ id: _id, ...view }: VolumeSummary): VolumeView {
  return view;
}

function fileView(f: VolumeFileRow): VolumeFileView {
  return { path: f.path, size: f.size, mode: f.mode.toString(8).padStart(4, '0'), mtime: f.mtime };
}
