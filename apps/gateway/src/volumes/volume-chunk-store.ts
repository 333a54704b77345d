import { Inject, Injectable, NotFoundException } from '@nestjs/common';
import { type ObjectStore, Objm } from '@nats-io/obj';
import { TERN_CONFIG, type TernConfig } from '#tern/config';
import { VOLUME_CHUNKS_BUCKET, type VolumeBlobGrant } from '#tern/contracts';
import { Messaging } from '#tern/messaging';
import {
  EMPTY_CONFIG,
  inParallel,
  RegistryBlobs,
  sha256Hex,
  volumeRepository,
  volumeVersionManifest,
  volumeVersionTag,
} from '#tern/volumes';
import { RegistryTokens } from '../registry-tokens/registry-tokens.service.js';

/** Blobs checked at once when a commit names many chunks. */
const CHECKS_IN_PARALLEL = 16;

/**
 * Where volume chunks live. With a registry that takes the gateway's tokens, each volume's chunks
 * are blobs of its own repository (`volumes/<workspace id>/<volume id>`): machines fetch and push
 * them there themselves with a token the gateway signs for that repository alone, so no
 * control-plane process carries their bytes. Without one (no REGISTRY_URL, or static registry
 * users that cannot be scoped to a volume), the `volume-chunks` NATS object store, objects named
 * `<workspace id>.<sha256 hex>`, served to machines by the gateway.
 */
@Injectable()
export class VolumeChunkStore {
  private readonly registryUrl?: string;

  constructor(
    private readonly messaging: Messaging,
    private readonly tokens: RegistryTokens,
    @Inject(TERN_CONFIG) config: TernConfig,
  ) {
    if (config.registry && tokens.enabled) this.registryUrl = config.registry.url;
  }

  /** Whether chunks are registry blobs (else objects of the NATS object store). */
  get inRegistry(): boolean {
    return this.registryUrl !== undefined;
  }

  /** Opened (created when missing) on first use; a failed open is retried on the next call. */
  private open(): Promise<ObjectStore> {
    return this.messaging.objectStore({ name: VOLUME_CHUNKS_BUCKET.name, description: VOLUME_CHUNKS_BUCKET.description });
  }

  /** The gateway's own access to a volume's repository (delete: its version manifests). */
  private blobs(workspaceId: string, volumeId: string): RegistryBlobs {
    const repository = volumeRepository(workspaceId, volumeId);
    return new RegistryBlobs(async () => ({
      url: this.registryUrl!,
      repository,
      token: this.tokens.controlPlaneToken([{ repository, actions: ['pull', 'push', 'delete'] }])!,
    }));
  }

  /** Whether the volume's store holds the chunk (the NATS store: the workspace's). */
  async holds(workspaceId: string, volumeId: string, hex: string): Promise<boolean> {
    if (this.inRegistry) return (await this.blobs(workspaceId, volumeId).size(hex)) !== undefined;
    const info = await (await this.open()).info(objectName(workspaceId, hex));
    return !!info && !info.deleted;
  }

  /** The chunk's bytes (at most VOLUME_CHUNK_BYTES), checked against its digest; null when the store does not have it. */
  async get(workspaceId: string, volumeId: string, hex: string): Promise<Uint8Array | null> {
    if (!this.inRegistry) return (await this.open()).getBlob(objectName(workspaceId, hex));
    const blobs = this.blobs(workspaceId, volumeId);
    if ((await blobs.size(hex)) === undefined) return null;
    const data = new Uint8Array(await new Response(await blobs.open(hex)).arrayBuffer());
    if (sha256Hex(data) !== hex) throw new Error(`volume chunk ${hex} in the registry hashes to ${sha256Hex(data)}; refusing it`);
    return data;
  }

  async put(workspaceId: string, volumeId: string, hex: string, chunk: Uint8Array): Promise<void> {
    if (this.inRegistry) await this.blobs(workspaceId, volumeId).put(hex, chunk);
    else await (await this.open()).putBlob({ name: objectName(workspaceId, hex) }, chunk);
  }

  /**
   * Forgets a chunk nothing holds any more. A registry blob is left to the registry's garbage
   * collection, which frees it once no version manifest names it (docs/operations.md): the
   * same digest may be linked in other volumes' repositories.
   */
  async delete(workspaceId: string, hex: string): Promise<void> {
    if (!this.inRegistry) await (await this.open()).delete(objectName(workspaceId, hex));
  }

  /** Registry only: the sizes of the chunks the volume's repository holds, as the registry reports them (not a machine's word). */
  async sizes(workspaceId: string, volumeId: string, digests: readonly string[]): Promise<Map<string, number>> {
    const blobs = this.blobs(workspaceId, volumeId);
    const sizes = new Map<string, number>();
    await inParallel([...new Set(digests)], CHECKS_IN_PARALLEL, async (hex) => {
      const size = await blobs.size(hex);
      if (size !== undefined) sizes.set(hex, size);
    });
    return sizes;
  }

  /**
   * Registry only: tags the volume's version as an OCI artifact manifest naming every chunk its
   * files hold (the registry refuses it if the repository lacks one), then deletes the manifests
   * of older versions. Whichever gateway publishes last, the newest version's manifest stays, so
   * the registry's garbage collection keeps what the volume holds and frees what only its old
   * versions held.
   */
  async publish(workspaceId: string, volumeId: string, version: number, chunks: ReadonlyMap<string, number>): Promise<void> {
    if (!this.inRegistry) return;
    const blobs = this.blobs(workspaceId, volumeId);
    await blobs.put(sha256Hex(EMPTY_CONFIG.bytes), EMPTY_CONFIG.bytes);
    await blobs.putManifest(volumeVersionTag(version), volumeVersionManifest(version, chunks));
    await this.unpublish(workspaceId, volumeId, version);
  }

  /** Registry only: whether the volume's version is tagged (then the repository holds every chunk it names). */
  async published(workspaceId: string, volumeId: string, version: number): Promise<boolean> {
    return (await this.blobs(workspaceId, volumeId).tags()).includes(volumeVersionTag(version));
  }

  /**
   * Registry only: copies the chunks the volume's repository lacks from the `volume-chunks`
   * object store, where the gateway kept them before the registry held volumes, each checked
   * against its digest. A chunk in neither is an error naming it.
   */
  async adopt(workspaceId: string, volumeId: string, digests: readonly string[]): Promise<void> {
    const blobs = this.blobs(workspaceId, volumeId);
    await inParallel([...new Set(digests)], CHECKS_IN_PARALLEL, async (hex) => {
      if ((await blobs.size(hex)) !== undefined) return;
      const data = await (await this.legacy()).getBlob(objectName(workspaceId, hex));
      if (!data) throw new Error(`volume chunk ${hex} is neither in the registry nor in the ${VOLUME_CHUNKS_BUCKET.name} object store`);
      if (sha256Hex(data) !== hex)
        throw new Error(`volume chunk ${hex} in the ${VOLUME_CHUNKS_BUCKET.name} object store hashes to ${sha256Hex(data)}`);
      await blobs.put(hex, data);
    });
  }

  /** The object store of the layout before the registry held volumes, opened as it is (never made). */
  private legacy(): Promise<ObjectStore> {
    return new Objm(this.messaging.nc).open(this.messaging.ns.bucket(VOLUME_CHUNKS_BUCKET.name)).catch((e: Error) => {
      throw new Error(
        `the volume's chunks are not all in the registry, and there is no ${VOLUME_CHUNKS_BUCKET.name} object store to take them from (${e.message})`,
      );
    });
  }

  /** Registry only: deletes the volume's version manifests older than `below` (all of them without): its blobs go at the next garbage collection. */
  async unpublish(workspaceId: string, volumeId: string, below = Infinity): Promise<void> {
    if (!this.inRegistry) return;
    const blobs = this.blobs(workspaceId, volumeId);
    for (const tag of await blobs.tags()) {
      const version = /^v(\d+)$/.exec(tag)?.[1];
      if (version !== undefined && Number(version) < below) await blobs.deleteManifest(tag);
    }
  }

  /**
   * A machine's token for one volume's repository: pull, and push for a read-write mount. The
   * caller has checked that a container mounting it is placed on the machine.
   */
  grant(machineId: string, workspaceId: string, volumeId: string, push: boolean): VolumeBlobGrant {
    const repository = volumeRepository(workspaceId, volumeId);
    const signed = this.inRegistry
      ? this.tokens.tokenFor(`machine:${machineId}`, [{ repository, actions: push ? ['pull', 'push'] : ['pull'] }])
      : undefined;
    if (!signed)
      throw new NotFoundException(
        "this installation keeps volume chunks in the gateway's NATS object store (no registry with token auth): fetch them from …/chunks/<hex>",
      );
    return { url: this.registryUrl!, repository, token: signed.token, expiresIn: signed.expiresIn };
  }
}

function objectName(workspaceId: string, hex: string): string {
  return `${workspaceId}.${hex}`;
}
